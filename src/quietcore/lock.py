"""One lock per node for what quietcore is using: a measurement holds its
CPUs, a lever writer holds its levers. Each is a file lock (flock) that the
kernel drops with the process, so a crash never leaves a stale lock; the
file also holds the owner's pid, start time and command, to name it to the
second comer. That one waits up to --wait seconds, else exits 3.

The lock files live in one directory for every user of the node:
$QUIETCORE_LOCK_DIR, else /run/lock/quietcore, else /tmp/quietcore-lock
(both world-writable with the sticky bit, like /run/lock itself)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from quietcore.errors import CommandError
from quietcore.owner import Owner
from quietcore.store.sessions import now_iso

ENV_VAR = "QUIETCORE_LOCK_DIR"
POLL_S = 0.1


def lock_dir() -> Path:
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    run_lock = Path("/run/lock")
    base = run_lock if run_lock.is_dir() and os.access(run_lock, os.W_OK) else Path("/tmp")
    return base / ("quietcore" if base == run_lock else "quietcore-lock")


def _open_dir(path: Path) -> None:
    if not path.is_dir():
        with contextlib.suppress(FileExistsError):
            path.mkdir(parents=True)
            # Shared by every user, as /tmp is: sticky, so none removes another's files.
            os.chmod(path, 0o1777)


def resources(cpus: Iterable[int] = (), levers: Iterable[str] = ()) -> list[str]:
    """Lock names in one global order (levers, then CPUs by number), so two
    processes that each wait for the other's cannot deadlock."""
    return [f"lever-{name}" for name in sorted(set(levers))] + [f"cpu-{cpu}" for cpu in sorted(set(cpus))]


def _describe(name: str) -> str:
    kind, _, what = name.partition("-")
    return f"CPU {what}" if kind == "cpu" else f"lever {what}"


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
        return f"pid {info['pid']} (`{info['command']}`, since {info['since'][11:19]} UTC)"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


class NodeLock:
    """Hold the named resources for the life of a `with` block."""

    def __init__(self, cpus: Iterable[int] = (), levers: Iterable[str] = (), wait_s: float = 0.0) -> None:
        self.names = resources(cpus, levers)
        self.wait_s = wait_s
        self.fds: list[int] = []

    def __enter__(self) -> NodeLock:
        directory = lock_dir()
        _open_dir(directory)
        deadline = time.monotonic() + self.wait_s
        try:
            for name in self.names:
                self._take(directory / f"{name}.lock", name, deadline)
        except BaseException:
            self.release()
            raise
        return self

    def _take(self, path: Path, name: str, deadline: float) -> None:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise CommandError(f"cannot open the node lock {path}: {exc.strerror} (set ${ENV_VAR})", 3) from exc
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(path)
                if time.monotonic() >= deadline:
                    os.close(fd)
                    waited = f"waited {self.wait_s:g} s; " if self.wait_s else ""
                    raise CommandError(
                        f"{_describe(name)} is in use by quietcore {holder}: {waited}wait for it with --wait S",
                        exit_code=3,
                    ) from None
                if not told:
                    print(f"quietcore: waiting for {_describe(name)}, held by {holder}", file=sys.stderr)
                    told = True
                time.sleep(POLL_S)
        self.fds.append(fd)
        me = Owner.me()
        record = {"pid": me.pid, "start": me.started, "command": me.command, "since": now_iso()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # the next user of any uid can open it too

    def release(self) -> None:
        for fd in self.fds:
            os.close(fd)  # closing drops the flock
        self.fds.clear()

    def __exit__(self, *exc: object) -> None:
        self.release()

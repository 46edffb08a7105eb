"""One lock per node for what quietcore is using: a measurement holds its
CPUs, a lever writer holds its levers. Each is a file lock (flock) that the
kernel drops with the process, so a crash never leaves a stale lock. The
second comer waits up to --wait seconds, else exits 3 naming the holder,
which it finds in /proc/locks: the lock files hold nothing to trust.

The lock files live in the state directory (quietcore.statedir). Root's is
/run/quietcore: root makes each file there (one per possible CPU when the
directory is new), and every user of the node locks them opened read-only,
which flock allows, so a user's quietcore and root's take turns for a CPU.
Nobody but root can make or replace a file there. Where root has not made
one (no quietcore ran as root since boot), a user locks a file of their own
state directory instead, which orders only that user's processes."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from quietcore import statedir
from quietcore.errors import CommandError
from quietcore.facts.cpulist import parse_cpulist
from quietcore.safe import plain

POLL_S = 0.1


def resources(cpus: Iterable[int] = (), levers: Iterable[str] = ()) -> list[str]:
    """Lock names in one global order (levers, then CPUs by number), so two
    processes that each wait for the other's cannot deadlock."""
    return [f"lever-{name}" for name in sorted(set(levers))] + [f"cpu-{cpu}" for cpu in sorted(set(cpus))]


def _describe(name: str) -> str:
    kind, _, what = name.partition("-")
    return f"CPU {what}" if kind == "cpu" else f"lever {what}"


def _possible_cpus() -> list[int]:
    try:
        return sorted(parse_cpulist(Path("/sys/devices/system/cpu/possible").read_text().strip()))
    except (OSError, ValueError):
        return list(range(os.cpu_count() or 1))


def prepare(state: statedir.StateDir) -> None:
    """Root makes a lock file for every possible CPU, so that users can lock
    them too (they cannot make files here)."""
    for cpu in _possible_cpus():
        if not state.exists(f"lock-cpu-{cpu}"):
            os.close(state.open_file(f"lock-cpu-{cpu}", os.O_RDONLY | os.O_CREAT, 0o644))


def _open(name: str) -> int:
    """A descriptor to flock for `name`: root's file in root's state
    directory; for a user, root's file read-only where it exists, else one
    of the user's own."""
    file = f"lock-{name}"
    if os.geteuid() == 0:
        with statedir.StateDir.open() as state:
            return state.open_file(file, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        with statedir.StateDir.open(statedir.node_path(), create=False, owner=0) as shared:
            return shared.open_file(file, os.O_RDONLY, owner=0)
    except (FileNotFoundError, statedir.StateError):
        pass  # root has not made it (or it is not root's alone): this user's own
    with statedir.StateDir.open() as own:
        return own.open_file(file, os.O_RDONLY | os.O_CREAT, 0o600)


def holder(fd: int) -> str:
    """Who holds the flock on fd's file, from /proc/locks, named by its
    command line (escaped: another user's process names it)."""
    st = os.fstat(fd)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="utf-8") as locks:
            pids = [int(f[4]) for f in (line.split() for line in locks) if len(f) > 5 and f[5] == device]
    except (OSError, ValueError):
        pids = []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv if w]
        command = " ".join(["quietcore", *words[words.index("quietcore") + 1 :]] if "quietcore" in words else words)
        return f"pid {pid} (`{plain(command[:200])}`)"
    return "another process"


class NodeLock:
    """Hold the named resources for the life of a `with` block."""

    def __init__(self, cpus: Iterable[int] = (), levers: Iterable[str] = (), wait_s: float = 0.0) -> None:
        self.names = resources(cpus, levers)
        self.wait_s = wait_s
        self.fds: list[int] = []

    def __enter__(self) -> NodeLock:
        deadline = time.monotonic() + self.wait_s
        try:
            if os.geteuid() == 0 and self.names:
                with statedir.StateDir.open() as state:
                    prepare(state)
            for name in self.names:
                self._take(name, deadline)
        except BaseException:
            self.release()
            raise
        return self

    def _take(self, name: str, deadline: float) -> None:
        try:
            fd = _open(name)
        except OSError as exc:
            raise CommandError(f"cannot open the node lock for {_describe(name)}: {exc.strerror}", 3) from exc
        self.fds.append(fd)
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                who = holder(fd)
                if time.monotonic() >= deadline:
                    waited = f"waited {self.wait_s:g} s; " if self.wait_s else ""
                    raise CommandError(
                        f"{_describe(name)} is in use by quietcore {who}: {waited}wait for it with --wait S",
                        exit_code=3,
                    ) from None
                if not told:
                    print(f"quietcore: waiting for {_describe(name)}, held by {who}", file=sys.stderr)
                    told = True
                time.sleep(POLL_S)

    def try_take(self) -> bool:
        """Take every resource now or none (crash recovery: a knob in use by
        a live quietcore is left for later)."""
        try:
            self.__enter__()
        except CommandError:
            return False
        return True

    def release(self) -> None:
        for fd in self.fds:
            os.close(fd)  # closing drops the flock
        self.fds.clear()

    def __exit__(self, *exc: object) -> None:
        self.release()

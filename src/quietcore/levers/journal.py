"""The lever journal. Each change is recorded as 'pending' before the write
and as 'temporary' or 'kept' after it. Temporary changes are undone, newest
first, when the work ends (also on Ctrl-C and SIGTERM, through the context
manager and cli's SIGTERM handler); a process that died leaves them in the
journal, and `recover`, which every command runs first, puts them back.
Kept changes stay until `quietcore tune revert`. Unlike pyperf's reset,
which writes fixed defaults, this restores exactly what was there before."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from quietcore.actions import FILE_KINDS, Action
from quietcore.errors import CommandError, UsageError
from quietcore.facts.root import Root
from quietcore.levers import cpuset, pmqos, service, task
from quietcore.owner import Owner, alive
from quietcore.store import journal as rows

LASTING = ("temporary", "kept")
HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold the signals that end a command while one knob is recorded,
    written and marked: they arrive (as KeyboardInterrupt, see cli) once
    the entry says truly whether the write happened. Only a kill -9 can
    stop it in between, and leaves the entry pending for revert.

    Held by Python handlers that note the signal, not by a signal mask: a
    mask is per thread, and the kernel hands a process-wide signal to any
    thread that does not block it (rich's refresh thread, say), whose C
    handler then interrupts the main thread all the same."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in HELD}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        if caught:
            signal.raise_signal(caught[0])  # to the handler it was sent to, now that the knob is settled


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except PermissionError as exc:
        if os.geteuid() == 0:  # root was refused: the kernel made the file read-only (a managed IRQ, say)
            raise CommandError(f"cannot write {value!r} to {path}: the kernel does not allow it ({_errno(exc)})",
                               exit_code=3) from exc  # fmt: skip
        raise CommandError(f"cannot write {path}: needs root", exit_code=3) from exc
    except OSError as exc:
        raise CommandError(f"cannot write {value!r} to {path}: {exc.strerror} ({_errno(exc)})", exit_code=1) from exc


def _errno(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc.errno))


#: Knobs that are not a file's content, each read and written by its lever
#: on the live node: kind -> (read: target -> value or None when gone,
#: write: target, value -> None, raising OSError or task.Gone).
OWN: dict[str, tuple[Callable[[str], str | None], Callable[[str, str], None]]] = {
    "task-affinity": (task.read, task.write),  # target "TID@START"
    "cpuset-task": (cpuset.read_task, cpuset.write_task),  # target "TID@START"
    "cpuset-dir": (cpuset.read_dir, cpuset.write_dir),
    "cgroup-controller": (cpuset.read_controller, cpuset.write_controller),
    pmqos.KIND: (pmqos.read, pmqos.write),
    service.KIND: (service.read, service.write),
}
OWN_KINDS = tuple(OWN)
THREAD_KINDS = ("task-affinity", "cpuset-task")


def put(kind: str, target: str, value: str) -> None:
    """Set one knob: a file, or a knob of OWN (a thread, a cpuset, a
    controller, a PM QoS hold, a service)."""
    if kind not in OWN:
        _write(Path(target), value)
        return
    try:
        OWN[kind][1](target, value)
    except task.Gone as exc:
        raise CommandError(f"thread {target.partition('@')[0]} has exited", exit_code=1) from exc
    except OSError as exc:
        what = f"thread {target.partition('@')[0]} to CPUs {value}" if kind in THREAD_KINDS else f"{target} {value}"
        why = f"{exc.strerror} ({_errno(exc)})" if exc.errno else str(exc)
        raise CommandError(f"cannot set {what}: {why}", exit_code=1) from exc


def get(kind: str, target: str) -> str | None:
    """A knob's value now; None when it is gone."""
    if kind in OWN:
        return OWN[kind][0](target)
    try:
        return Path(target).read_text().strip()
    except OSError:
        return None


def offered_or_why(value: str, offered: list[str]) -> str | None:
    """None when the kernel offers `value`, else what it does offer."""
    return None if value in offered else f"this kernel offers: {', '.join(offered) or 'none'}"


def check_offered(lever: str, value: str, why: str | None) -> None:
    """A value the kernel does not offer is bad input, refused before any write."""
    if why:
        raise UsageError(f"invalid {lever} value {value!r} ({why})")


def _refusal(kind: str, exc: CommandError) -> bool:
    """The kernel refusing one IRQ (a managed IRQ gives EIO, a mask it cannot
    route EINVAL) is reported for that IRQ and the rest go on; refusals of
    other knobs, and a missing permission, stop the work."""
    cause = exc.__cause__
    if kind in THREAD_KINDS:  # a thread that exited, or a kthread bound to its CPU
        return isinstance(cause, (OSError, task.Gone))
    if kind != "irq-affinity" or not isinstance(cause, OSError):
        return False
    return not isinstance(cause, PermissionError) or os.geteuid() == 0


class Journal:
    def __init__(self, conn: sqlite3.Connection, session_id: int | None, lasting: str = "temporary") -> None:
        if lasting not in LASTING:
            raise ValueError(f"unknown lasting state {lasting!r}")
        self.conn = conn
        self.session_id = session_id
        self.lasting = lasting
        self.owner = Owner.me()
        self.open: list[int] = []  # temporary entries of this journal, in the order applied

    def apply(self, lever: str, action: Action, root: Root, old: str | None = None) -> str | None:
        """Carry out one file action of `root` (the node's, or a fixture
        tree's), its old value recorded first: `old` as the lever reads it
        (the selected word of a selector file), else the file's content.
        Returns None, or the kernel's refusal of an IRQ (recorded as failed)."""
        if action.kind not in (*FILE_KINDS, *OWN_KINDS):
            raise ValueError(f"the journal writes files, threads and cpusets, not {action.kind!r} actions")
        if action.kind in OWN:  # the live node's: the target as it is ("TID@START", a unit, a path)
            path = Path(action.target)
            old = get(action.kind, action.target)
            if old is None and action.kind in THREAD_KINDS:
                return f"thread {action.target.partition('@')[0]} has exited"
            if old is None:
                raise CommandError(f"cannot read {action.target} ({action.kind})", exit_code=3)
        else:
            path = root.resolve(action.target)
            old = old if old is not None else root.read_line(action.target)
            if old is None:
                raise CommandError(f"cannot read {path}: {root.read(action.target)[1]}", exit_code=3)
        with held_signals():  # a Ctrl-C, SIGTERM or SIGHUP waits until the knob and its entry agree
            try:
                entry = rows.add(self.conn, self.session_id, self.owner,
                                 {"lever": lever, "kind": action.kind, "target": str(path), "old_value": old,
                                  "new_value": action.value, "lasting": self.lasting})  # fmt: skip
            except sqlite3.Error as exc:  # a full disk, a read-only or locked database: change nothing unrecorded
                raise CommandError(f"cannot record the old value of {path} in the journal ({exc}): "
                                   "not changed", exit_code=1) from exc  # fmt: skip
            try:
                put(action.kind, str(path), action.value)
            except CommandError as exc:
                with contextlib.suppress(sqlite3.Error):  # pending stays pending: a revert tries it
                    rows.mark(self.conn, entry, "failed", str(exc))
                if _refusal(action.kind, exc):
                    return str(exc)
                raise
            if self.lasting == "temporary":
                self.open.append(entry)  # before the mark: an undo must see it even if the mark fails
            try:
                rows.mark(self.conn, entry, self.lasting)
            except sqlite3.Error as exc:
                raise CommandError(f"{path} was changed, but the journal could not say so ({exc}): it stays "
                                   "recorded as pending, and `quietcore tune revert` (or the next command, for "
                                   "a temporary change) puts it back", exit_code=1) from exc  # fmt: skip
        return None

    def undo(self) -> list[str]:
        """Put back every temporary change of this journal, newest first;
        returns the problems met (a lever that could not be restored is
        reported, and stays temporary so that `recover` tries again)."""
        problems = []
        # Held over the whole undo, not each knob: a Ctrl-C that lands
        # between two knobs (or as a probe ends and the undo begins) waits
        # until every one is back, then ends the command.
        with held_signals():
            for entry in reversed(self.open):
                row = rows.get(self.conn, entry)
                try:
                    put(row["kind"], row["target"], row["old_value"])
                    with contextlib.suppress(sqlite3.Error):  # put back either way; a stale row is tried again
                        rows.mark(self.conn, entry, "reverted")
                except CommandError as exc:
                    problems.append(str(exc))
            self.open.clear()
        return problems

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for problem in self.undo():
            print(f"quietcore: {problem} (left in the journal: the next command tries again)", file=sys.stderr)


def recover(conn: sqlite3.Connection) -> list[str]:
    """Revert the temporary changes (and pending ones: the write may have
    happened) that dead quietcore processes of this host left. Kept changes
    stay. Returns one line per change put back or not."""
    lines = []
    for row in rows.open_entries(conn, socket.gethostname(), ("pending", "temporary")):
        if row["lasting"] == "kept" or alive(int(row["pid"]), row["pid_start"]):
            continue  # meant to last, or still running: its own undo will do it
        who = f"pid {row['pid']}" + (f" (`{row['command']}`)" if row["command"] else "")
        try:
            put(row["kind"], row["target"], row["old_value"])
        except CommandError as exc:
            lines.append(f"could not put back {row['lever']} ({row['target']}), left by {who} which ended: {exc}")
            continue
        rows.mark(conn, int(row["id"]), "reverted", f"put back by the next command ({who} had ended)")
        restored = f"put back {row['lever']} to {row['old_value']!r} ({row['target']})"
        lines.append(f"{restored}: {who} ended without undoing it")
    return lines

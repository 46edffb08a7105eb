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
import sqlite3
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from quietcore import knobs
from quietcore.actions import Action
from quietcore.errors import CommandError, UsageError
from quietcore.facts.root import Root
from quietcore.knobs import THREAD_KINDS, Gone
from quietcore.levers.names import NAMES
from quietcore.lock import NodeLock
from quietcore.owner import Owner, alive
from quietcore.safe import plain
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
    previous: dict[signal.Signals, Any] = {}
    try:
        for held in HELD:
            previous[held] = signal.signal(held, lambda signum, frame: caught.append(signum))
    except BaseException:
        # A signal came while the handlers were being swapped, and its own
        # handler ran: put back those already swapped, so that none stays
        # noting signals for good, and let it end the work (nothing is held yet).
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        raise
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if caught:
            signal.raise_signal(caught[0])  # to the handler it was sent to, now that the knob is settled


def _errno(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc.errno))


def put(kind: str, root: Root, target: str, value: str) -> None:
    """Set one knob through its kind, which refuses a target or value
    outside its patterns (TargetError, exit 2) before anything is written."""
    knob = knobs.kind(kind)
    knob.check(root, target)
    knob.check_value(root, target, value)
    try:
        knob.write(root, target, value)
    except Gone as exc:
        raise CommandError(f"{knob.describe(target)} has exited", exit_code=1) from exc
    except PermissionError as exc:
        if os.geteuid() == 0:  # root was refused: the kernel made the file read-only (a managed IRQ, say)
            raise CommandError(f"cannot write {value!r} to {target}: the kernel does not allow it ({_errno(exc)})",
                               exit_code=3) from exc  # fmt: skip
        raise CommandError(f"cannot write {target}: needs root", exit_code=3) from exc
    except OSError as exc:
        what = f"{knob.describe(target)} to CPUs {value}" if kind in THREAD_KINDS else f"{target} {value}"
        why = f"{exc.strerror} ({_errno(exc)})" if exc.errno else str(exc)
        raise CommandError(f"cannot set {what}: {why}", exit_code=1) from exc


def get(kind: str, root: Root, target: str) -> str | None:
    """A knob's value now; None when it is gone (or outside its kind's patterns)."""
    knob = knobs.kind(kind)
    try:
        knob.check(root, target)
    except knobs.TargetError:
        return None
    return knob.read(root, target)


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
        return isinstance(cause, (OSError, Gone))
    if kind != "irq-affinity" or not isinstance(cause, OSError):
        return False
    return not isinstance(cause, PermissionError) or os.geteuid() == 0


@contextlib.contextmanager
def node_journal() -> Iterator[sqlite3.Connection]:
    """The node journal's connection, in the state directory (made if need be)."""
    conn = rows.open_node()
    assert conn is not None
    try:
        yield conn
    finally:
        conn.close()


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
        """Carry out one action on `root` (the node's, or a fixture tree's),
        its old value recorded first: `old` as the lever reads it (the
        selected word of a selector file), else as its kind reads it back.
        Returns None, or the kernel's refusal of an IRQ or a thread
        (recorded as failed). A target outside its kind's patterns is
        refused before anything is read or written."""
        knob = knobs.kind(action.kind)
        target = knob.check(root, action.target)
        knob.check_value(root, target, action.value)
        old = old if old is not None else knob.restorable(root, target)
        if old is None and action.kind in THREAD_KINDS:
            return f"{knob.describe(target)} has exited"
        if old is None:
            raise CommandError(f"cannot read {target} ({action.kind})", exit_code=3)
        with held_signals():  # a Ctrl-C, SIGTERM or SIGHUP waits until the knob and its entry agree
            try:
                entry = rows.add(self.conn, self.session_id, self.owner,
                                 {"lever": lever, "kind": action.kind, "root": str(root.path), "target": target,
                                  "old_value": old, "new_value": action.value, "lasting": self.lasting})  # fmt: skip
            except sqlite3.Error as exc:  # a full disk, a read-only or locked database: change nothing unrecorded
                raise CommandError(f"cannot record the old value of {target} in the journal ({exc}): "
                                   "not changed", exit_code=1) from exc  # fmt: skip
            try:
                put(action.kind, root, target, action.value)
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
                raise CommandError(f"{target} was changed, but the journal could not say so ({exc}): it stays "
                                   "recorded as pending, and `quietcore tune revert` (or the next command, for "
                                   "a temporary change) puts it back", exit_code=1) from exc  # fmt: skip
        return None

    def undo(self) -> list[str]:
        """Put back every temporary change of this journal, newest first;
        returns the problems met (a lever that could not be restored is
        reported, and stays temporary so that `recover` tries again)."""
        stopped: BaseException | None = None
        while True:
            try:
                problems = self._undo_held()
                break
            except KeyboardInterrupt as exc:
                if not self.open:  # everything is back: the signal came as the hold ended
                    raise
                stopped = exc  # it came as the hold began, before any knob: undo all the same, then end
        if stopped is not None:
            raise stopped
        return problems

    def _undo_held(self) -> list[str]:
        problems = []
        # Held over the whole undo, not each knob: a Ctrl-C that lands
        # between two knobs (or as a probe ends and the undo begins) waits
        # until every one is back, then ends the command.
        with held_signals():
            for entry in reversed(self.open):
                row = rows.get(self.conn, entry)
                try:
                    put(row["kind"], Root(row["root"]), row["target"], row["old_value"])
                    with contextlib.suppress(sqlite3.Error):  # put back either way; a stale row is tried again
                        rows.mark(self.conn, entry, "reverted")
                except CommandError as exc:
                    if isinstance(exc.__cause__, Gone):  # a thread that exited: nothing of it is left to put back
                        with contextlib.suppress(sqlite3.Error):
                            rows.mark(self.conn, entry, "gone", "its target no longer exists")
                        continue
                    problems.append(str(exc))
            self.open.clear()
        return problems

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for problem in self.undo():
            print(f"quietcore: {problem} (left in the journal: the next command tries again)", file=sys.stderr)


@dataclass(frozen=True)
class Settled:
    """One entry recover settled, in a line: `failed` where it could not be put back (what a person must
    know); the rest is the journal's own housekeeping, said with --verbose."""

    text: str
    failed: bool = False


def recover(conn: sqlite3.Connection) -> list[Settled]:
    """Revert the temporary changes (and pending ones: the write may have
    happened) that dead quietcore processes left, under the locks of their
    levers (a lever a live quietcore holds is left for later). Kept changes
    stay. Entries of an earlier boot are closed, never replayed; a target
    that is gone is closed as gone. Returns one line per entry settled."""

    lines = []
    ended = rows.close_other_boots(conn)
    if ended:
        lines.append(Settled(f"closed {ended} journal entr{'ies' if ended > 1 else 'y'} of an earlier boot: the "
                             "reboot reset those knobs"))  # fmt: skip
    dead = [row for row in rows.open_entries(conn, ("pending", "temporary"))
            if row["lasting"] != "kept" and not alive(int(row["pid"]), row["pid_start"])]  # fmt: skip
    if not dead:
        return lines
    # Every lever's lock, as `run` and `tune` take them by name: a live
    # quietcore that writes any knob now may have set one of these since,
    # and putting back the old value under it would undo its work.
    lock = NodeLock((), (*NAMES, "tune"))
    if not lock.try_take():
        return [*lines, Settled("left the changes of an ended quietcore for later: another quietcore holds their "
                                "levers")]  # fmt: skip
    try:
        with held_signals():
            for row in dead:
                lines.append(_put_back(conn, row))
    finally:
        lock.release()
    return lines


def _put_back(conn: sqlite3.Connection, row: sqlite3.Row) -> Settled:
    who = f"pid {row['pid']}" + (f" (`{plain(row['command'])}`)" if row["command"] else "")
    root, target, kind = Root(row["root"]), row["target"], row["kind"]
    name = f"{row['lever']} ({plain(target)})"
    try:
        knob = knobs.kind(kind)
        knob.check(root, target)
        knob.check_value(root, target, row["old_value"])
    except knobs.TargetError as exc:
        rows.mark(conn, int(row["id"]), "failed", str(exc))
        return Settled(f"did not put back {name}, left by {who}: {exc}", failed=True)
    if knob.gone(root, target):
        rows.mark(conn, int(row["id"]), "gone", "its target no longer exists")
        return Settled(f"{name}, left by {who} which ended, is gone: nothing to put back")
    try:
        put(kind, root, target, row["old_value"])
    except CommandError as exc:
        return Settled(f"could not put back {name}, left by {who} which ended: {exc}", failed=True)
    rows.mark(conn, int(row["id"]), "reverted", f"put back by the next command ({who} had ended)")
    return Settled(f"put back {row['lever']} to {plain(row['old_value'])!r} ({plain(target)}): {who} ended without "
                   "undoing it")  # fmt: skip

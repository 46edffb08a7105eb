"""`pm-qos`: the C-state limit, a PM QoS request on /dev/cpu_dma_latency,
which the kernel honours only while the process that wrote it keeps the
file open (Documentation/power/pm_qos_interface.rst). `tune apply` exits,
so it starts a small holder: a detached process (its own session, no
terminal, SIGHUP ignored) that opens the device, writes the limit, says
"held" on its stdout, and sleeps. Its identity (pid and start time) is kept
in the node journal, never in a file another user could write; before any
signal quietcore checks that the process is still that holder: the same
start time, our uid, our command line, and the device open. The request
ends when the holder ends: revert sends it SIGTERM; a holder that died (or
a reboot) ends it too, which `tune verify` reports as drift.

The knob's value is the limit in µs, or "none" when no holder of
quietcore's runs. Run as `python -I -m quietcore.knobs.pmqos US` it is the
holder itself: -I, so that nothing in the caller's working directory or
environment is imported into a root process."""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from quietcore.facts.root import Root
from quietcore.knobs.base import Kind, TargetError
from quietcore.knobs.thread import zombie
from quietcore.owner import alive, start_time
from quietcore.store import journal

DEVICE = "/dev/cpu_dma_latency"
NAME = "pm-qos"
MODULE = "quietcore.knobs.pmqos"
START_S = 5.0  # how long a new holder may take to say it holds


def holder_argv(value: str) -> list[str]:
    return [sys.executable, "-I", "-m", MODULE, value]


def is_holder(pid: int, started: str, value: str) -> str | None:
    """None when pid is that very holder; else why not (the reason no
    signal is sent)."""
    if not alive(pid, started) or zombie(pid):
        return "it no longer runs"
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return "it no longer runs"
    uid = next((line.split()[1:3] for line in status.splitlines() if line.startswith("Uid:")), [])
    if uid != [str(os.geteuid())] * 2:
        return f"it runs as uid {'/'.join(uid) or '?'}, not {os.geteuid()}"
    if [a.decode(errors="replace") for a in argv[1:]] != holder_argv(value)[1:]:
        return "its command line is not quietcore's holder"
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == DEVICE:
                    return None
    return f"it does not hold {DEVICE} open"


def _recorded() -> tuple[int, str, str] | None:
    conn = journal.open_node(create=False)
    if conn is None:
        return None
    try:
        return journal.get_holder(conn, NAME)
    finally:
        conn.close()


def _record(pid: int | None, started: str = "", value: str = "") -> None:
    conn = journal.open_node()
    assert conn is not None
    try:
        if pid is None:
            journal.clear_holder(conn, NAME)
        else:
            journal.set_holder(conn, NAME, pid, started, value)
    finally:
        conn.close()


def running() -> tuple[int, str, str] | None:
    """(pid, start time, µs) of the running holder, checked, or None."""
    held = _recorded()
    return held if held and is_holder(*held) is None else None


class PmQos(Kind):
    name = NAME
    allowed = DEVICE

    def check(self, root: Root, target: str) -> str:
        if target != DEVICE:
            raise TargetError(f"refused {self.name} target {target!r} (valid: {DEVICE})")
        return target

    def check_value(self, root: Root, target: str, value: str) -> None:
        if value != "none" and not (value.isdigit() and int(value) <= 2_000_000_000):
            raise TargetError(f"refused {self.name} value {value!r} (valid: none, or 0-2000000000 µs)")

    def read(self, root: Root, target: str = DEVICE) -> str:
        held = running()
        return held[2] if held else "none"

    def gone(self, root: Root, target: str) -> bool:
        return False  # "none" is a value a revert may write back

    def write(self, root: Root, target: str, value: str) -> None:
        """Hold `value` µs (ending our holder first), or "none": end it.
        Raises OSError when the holder cannot open the device or will not end."""
        self.check(root, target)
        self.check_value(root, target, value)
        _end(_recorded())
        if value != "none":
            _start(value)

    def render(self, target: str, value: str) -> str:
        return (f"hold {target} open at {value} µs (a process that writes it and sleeps)" if value != "none"
                else f"end the process holding {target}")  # fmt: skip

    def export_line(self, target: str, value: str, knob: str) -> str:
        pid = "/run/quietcore-cpu_dma_latency.pid"  # the script's own holder, a shell's: root's /run
        if value == "none":
            return f"kill $(cat {pid}) 2>/dev/null; rm -f {pid}"
        raw = "".join(f"\\{b:03o}" for b in int(value).to_bytes(4, "little", signed=True))
        return (f"(exec 3>{shlex.quote(target)}; printf '{raw}' >&3; exec sleep infinity) </dev/null >/dev/null 2>&1 & "
                f"echo $! > {pid}")  # fmt: skip


def _end(held: tuple[int, str, str] | None) -> None:
    if held is None:
        return
    pid, started, value = held
    why = is_holder(pid, started, value)
    if why:  # never signal a process that is not that very holder
        _record(None)
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):  # the request ends with the process, however it ends
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + START_S / 2
        while is_holder(pid, started, value) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if is_holder(pid, started, value) is not None:
            _record(None)
            return
    raise OSError(f"the PM QoS holder (pid {pid}) does not end")


def _start(value: str) -> None:
    child = subprocess.Popen(holder_argv(value), start_new_session=True, cwd="/", stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert child.stdout is not None and child.stderr is not None
    ready, _, _ = select.select([child.stdout], [], [], START_S)
    said = child.stdout.readline().decode(errors="replace").strip() if ready else ""
    started = start_time(child.pid)
    if said == "held" and started:
        _record(child.pid, started, value)
        child.stdout.close()
        child.stderr.close()  # the holder's stdout and stderr are /dev/null from here on (see _hold)
        return
    child.kill()
    _, err = child.communicate()
    last = err.decode(errors="replace").strip().splitlines()
    raise OSError(f"the PM QoS holder did not hold {DEVICE}: {last[-1] if last else f'no word in {START_S:g} s'}")


def _hold(value: int) -> None:
    """The holder: keep the request until SIGTERM. It only sleeps, so it
    costs no CPU time anywhere; it wakes once, to end."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Started from inside the journal's held signals: a mask is inherited across exec.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    fd = os.open(DEVICE, os.O_WRONLY | os.O_CLOEXEC)
    os.write(fd, struct.pack("i", value))
    os.write(1, b"held\n")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)  # the parent stops reading: nothing may block on a full pipe
    while True:
        signal.pause()


KIND = PmQos()

if __name__ == "__main__":
    _hold(int(sys.argv[1]))

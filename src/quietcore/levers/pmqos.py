"""The C-state limit as a journaled knob: a PM QoS request on
/dev/cpu_dma_latency, which the kernel honours only while the process that
wrote it keeps the file open (Documentation/power/pm_qos_interface.rst).
`tune apply` cannot keep it, since it exits, so it starts a small holder
of its own: a detached process (its own session, no terminal, SIGHUP
ignored) that opens the file, writes the limit, records itself in a pid
file beside the node locks, and sleeps. The request ends when the holder
ends: `tune revert` sends it SIGTERM, and a holder that died (or a
reboot) ends it too, which `tune verify` reports as drift.

The knob's value is the limit in µs, or "none" when no holder of
quietcore's is running. Run as `python -m quietcore.levers.pmqos US` it
is the holder itself."""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from quietcore.levers.task import zombie
from quietcore.owner import alive, start_time

DEVICE = "/dev/cpu_dma_latency"
KIND = "pm-qos"
START_S = 5.0  # how long a new holder may take to say it holds


def pid_file() -> Path:
    from quietcore.lock import lock_dir

    return lock_dir() / "cpu_dma_latency.holder"


def _running(pid: int, started: str) -> bool:
    """That very process, and not a zombie: a holder that ended has closed
    the device, though its parent (init, here) may not have reaped it yet."""
    return alive(pid, started) and not zombie(pid)


def _holder() -> tuple[int, str, str] | None:
    """(pid, start time, µs) of the running holder, or None."""
    try:
        pid_start, value = pid_file().read_text().split()
        pid, _, started = pid_start.partition("@")
    except (OSError, ValueError):
        return None
    return (int(pid), started, value) if _running(int(pid), started) else None


def read(target: str = DEVICE) -> str:
    held = _holder()
    return held[2] if held else "none"


def write(target: str, value: str) -> None:
    """Hold `value` µs (ending any holder of ours first), or "none": end it.
    Raises OSError when the holder cannot open the device."""
    held = _holder()
    if held:
        for sig in (signal.SIGTERM, signal.SIGKILL):  # the request ends with the process, however it ends
            with contextlib.suppress(ProcessLookupError):
                os.kill(held[0], sig)
            deadline = time.monotonic() + START_S / 2
            while _running(held[0], held[1]) and time.monotonic() < deadline:
                time.sleep(0.01)
            if not _running(held[0], held[1]):
                break
        else:
            raise OSError(f"the PM QoS holder (pid {held[0]}) does not end")
    pid_file().unlink(missing_ok=True)
    if value == "none":
        return
    pid_file().parent.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen(
        [sys.executable, "-m", "quietcore.levers.pmqos", value], start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if read(target) == value:
            assert child.stderr is not None
            child.stderr.close()  # the holder's stderr is /dev/null from here on (see _hold)
            return
        if child.poll() is not None:
            _, err = child.communicate()
            raise OSError(f"the PM QoS holder ended: {err.strip().splitlines()[-1] if err.strip() else 'no word'}")
        time.sleep(0.01)
    child.kill()
    raise OSError(f"the PM QoS holder did not hold {DEVICE} within {START_S:g} s")


def _hold(value: int) -> None:
    """The holder: keep the request until SIGTERM. It only sleeps, so it
    costs no CPU time anywhere; it wakes once, to end."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Started from inside the journal's held_signals: the mask is inherited across exec.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    fd = os.open(DEVICE, os.O_WRONLY)
    os.write(fd, struct.pack("i", value))
    tmp = pid_file().with_suffix(".tmp")
    tmp.write_text(f"{os.getpid()}@{start_time(os.getpid())} {value}\n")
    tmp.replace(pid_file())
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)  # the parent stops reading: nothing may block on a full pipe
    while True:
        signal.pause()


if __name__ == "__main__":
    _hold(int(sys.argv[1]))

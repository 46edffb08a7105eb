"""quietcore's tracefs instances (instances/quietcore-PID), and those a
quietcore left behind when it was killed outright (SIGKILL, the OOM killer):
such an instance goes on tracing every CPU, and each traced event costs the
node time (seen here: a tick of 8 µs took 22-30 µs with one left on), so
every command removes them first, as it puts back the knobs the journal
holds. No numpy here: this runs at the start of every command."""

from __future__ import annotations

import contextlib
from pathlib import Path

from quietcore.owner import alive

MOUNTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
PREFIX = "quietcore-"


def mounted() -> Path | None:
    """Where tracefs is mounted with instances, if it is."""
    for m in MOUNTS:
        with contextlib.suppress(OSError):
            if (m / "instances").is_dir():
                return m
    return None


def close(instance: Path, events: tuple[str, ...] = (), triggers: dict[str, str] | None = None) -> None:
    """Stop an instance and remove it: tracing off, its triggers cleared (an
    instance with a trigger cannot be removed), its events off, then rmdir."""
    with contextlib.suppress(OSError):
        (instance / "tracing_on").write_text("0")
    for event, trigger in (triggers or {}).items():
        with contextlib.suppress(OSError):
            (instance / "events" / event / "trigger").write_text("!" + trigger)
    for event in events:
        with contextlib.suppress(OSError):
            (instance / "events" / event / "enable").write_text("0")
    instance.rmdir()


def _stale_triggers(instance: Path) -> dict[str, str]:
    """The triggers set in a dead quietcore's instance, by event, to clear."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for trigger in (instance / "events").glob("*/*/trigger"):
            with contextlib.suppress(OSError):
                for line in trigger.read_text().splitlines():
                    if line and not line.startswith("#"):
                        command = line.split()[0]  # stacktrace:unlimited -> stacktrace (a count is no part of it)
                        if command.split(":")[0] in ("stacktrace", "traceon", "traceoff", "snapshot"):
                            command = command.split(":")[0]
                        out[f"{trigger.parent.parent.name}/{trigger.parent.name}"] = command
    return out


def remove_stale(base: Path | None = None) -> list[str]:
    """Remove the instances of quietcore processes that are gone; the names removed."""
    base = base if base is not None else mounted()
    if base is None:
        return []
    removed = []
    try:
        entries = sorted((base / "instances").glob(f"{PREFIX}*"))
    except OSError:  # not root: instances cannot be read, nor made
        return []
    for entry in entries:
        pid = entry.name[len(PREFIX) :]
        if not pid.isdigit() or alive(int(pid), None):
            continue
        with contextlib.suppress(OSError):
            triggers = _stale_triggers(entry)
            with contextlib.suppress(OSError):
                (entry / "events" / "enable").write_text("0")  # every event of the instance, at once
            close(entry, (), triggers)
            removed.append(entry.name)
    return removed

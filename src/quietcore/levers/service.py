"""A systemd service's state as a journaled knob ("active" or "inactive",
through systemctl), for `tune`'s irqbalance: stopped while the tuning is
in force, started again by revert only if it was active before."""

from __future__ import annotations

import shutil
import subprocess

KIND = "service-state"


def read(unit: str) -> str | None:
    """ "active", "inactive" (or failed, activating...): systemctl's word;
    None without systemctl."""
    if not shutil.which("systemctl"):
        return None
    out = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True, check=False)
    return out.stdout.strip() or None


def write(unit: str, value: str) -> None:
    """Raises OSError with systemctl's own words when it fails."""
    verb = "start" if value == "active" else "stop"
    out = subprocess.run(["systemctl", verb, unit], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise OSError(f"systemctl {verb} {unit}: {out.stderr.strip() or f'exit {out.returncode}'}")

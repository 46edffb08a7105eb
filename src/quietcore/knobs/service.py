"""`service-state`: a systemd unit from a fixed list (irqbalance, which
would move IRQs back onto the targets), "active" or "inactive", through
systemctl: stopped while the tuning is in force, started again by revert
only if it was active before."""

from __future__ import annotations

import shlex
import shutil
import subprocess

from quietcore.facts.root import Root
from quietcore.knobs.base import Kind, TargetError

UNITS = ("irqbalance.service",)


class ServiceState(Kind):
    name = "service-state"
    allowed = ", ".join(UNITS)

    def check(self, root: Root, target: str) -> str:
        if target not in UNITS:
            raise TargetError(f"refused {self.name} target {target!r} (valid: {self.allowed})")
        return target

    def check_value(self, root: Root, target: str, value: str) -> None:
        if value not in ("active", "inactive"):
            raise TargetError(f"refused {self.name} value {value!r} (valid: active, inactive)")

    def read(self, root: Root, target: str) -> str | None:
        """systemctl's word ("active", "inactive", "failed"...); None without systemctl."""
        self.check(root, target)
        systemctl = shutil.which("systemctl", path="/usr/bin:/bin")
        if not systemctl:
            return None
        out = subprocess.run([systemctl, "is-active", target], capture_output=True, text=True, check=False)
        return out.stdout.strip() or None

    def write(self, root: Root, target: str, value: str) -> None:
        """Raises OSError with systemctl's own words when it fails."""
        self.check(root, target)
        self.check_value(root, target, value)
        verb = "start" if value == "active" else "stop"
        systemctl = shutil.which("systemctl", path="/usr/bin:/bin") or "systemctl"
        out = subprocess.run([systemctl, verb, target], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise OSError(f"systemctl {verb} {target}: {out.stderr.strip() or f'exit {out.returncode}'}")

    def render(self, target: str, value: str) -> str:
        return f"systemctl {'start' if value == 'active' else 'stop'} {target}"

    def export_line(self, target: str, value: str, knob: str) -> str:
        verb = "start" if value == "active" else "stop"
        return f"systemctl {verb} {shlex.quote(target)} || echo {shlex.quote(f'refused: {knob}')} >&2"


KIND = ServiceState()

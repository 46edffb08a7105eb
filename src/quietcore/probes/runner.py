"""Running quietcore-probe: find it, run it under a watchdog, read its JSON
envelope, and turn its exit codes into quietcore errors."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quietcore.errors import CommandError, Interrupted, UsageError
from quietcore.owner import step_aside, step_back
from quietcore.statedir import why_unsafe

ENV_VAR = "QUIETCORE_PROBE"
FORMAT_VERSION = 1
ENVELOPE_KEYS = (
    "format",
    "format_version",
    "tool_version",
    "command",
    "argv",
    "start",
    "end",
    "uname",
    "ran_on",
    "result",
)


@dataclass(frozen=True)
class ProbeResult:
    envelope: dict[str, Any]
    text: str  # the envelope exactly as the probe printed it: kept raw
    interrupted: bool
    #: noise: each CPU's (starts, durations) as numpy arrays, where the probe wrote them apart from its JSON
    #: (probes.noise.run_noise); empty where they are the envelope's pairs
    events: Mapping[int, Any] = field(default_factory=dict)

    @property
    def result(self) -> dict[str, Any]:
        value = self.envelope["result"]
        assert isinstance(value, dict)
        return value


def probe_path() -> Path:
    """$QUIETCORE_PROBE, else the executable installed inside the package.
    As root, $QUIETCORE_PROBE is honoured only for a binary that root owns
    and no one else can write, reached through directories no one else can
    write: anything else would run another user's program as root."""
    env = os.environ.get(ENV_VAR)
    path = Path(env) if env else Path(__file__).resolve().parent.parent / "bin" / "quietcore-probe"
    if env and os.geteuid() == 0:
        why = _untrusted(Path(os.path.abspath(env)))
        if why:
            raise CommandError(f"refusing ${ENV_VAR}={env} as root: {why} (valid: a binary that root owns and no one "
                               "else can write; unset it to use the installed probe)", exit_code=3)  # fmt: skip
    if not os.access(path, os.X_OK):
        where = f"${ENV_VAR} points to {path}" if env else f"{path} is missing"
        raise CommandError(f"the native core is not installed ({where}): reinstall with `pip install .`")
    return path


def _untrusted(path: Path) -> str | None:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot inspect it ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a link or something else)"
    if st.st_uid != 0:
        return f"owned by uid {st.st_uid}"
    if st.st_mode & 0o022:
        return f"writable by others (mode {st.st_mode & 0o7777:o})"
    why = why_unsafe(path.parent, 0)
    return f"its directory is not root's alone: {why}" if why else None


def child_env() -> dict[str, str]:
    """The environment of a probe: this process's, and its pid, so that the
    probe ends with it (PR_SET_PDEATHSIG): a kill -9 of quietcore leaves no
    spinner or competing load behind."""
    return {**os.environ, "QUIETCORE_PARENT": str(os.getpid())}


def parse_envelope(text: str) -> dict[str, Any]:
    """Check the envelope against the contract the probe keeps."""
    try:
        envelope = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"quietcore-probe printed invalid JSON: {exc}") from exc
    if not isinstance(envelope, dict) or envelope.get("format") != "quietcore-probe":
        raise CommandError("quietcore-probe printed something that is not its envelope")
    if envelope.get("format_version") != FORMAT_VERSION:
        raise CommandError(
            f"quietcore-probe envelope version {envelope.get('format_version')} is not {FORMAT_VERSION}: "
            "reinstall quietcore"
        )
    missing = [k for k in ENVELOPE_KEYS if k not in envelope]
    if missing:
        raise CommandError(f"quietcore-probe envelope lacks {', '.join(missing)}")
    return envelope


def run_probe(
    command: str,
    args: list[str],
    *,
    expected_s: float,
    on_tick: Callable[[float], None] | None = None,
    away: frozenset[int] = frozenset(),
    pass_fds: tuple[int, ...] = (),
) -> ProbeResult:
    """Run one probe subcommand. A watchdog kills it well after `expected_s`;
    Ctrl-C asks it to stop (it then reports what it measured so far).
    `away`: the CPUs it measures, which quietcore's threads leave while it
    runs, where they have somewhere else to go (once it started: it takes
    the mask it starts with). on_tick(seconds) every 0.2 s; without it, or
    when `away` leaves quietcore nowhere else to run, quietcore sleeps
    until the probe ends (a progress bar then stands still): a bar redrawn
    ten times a second on a measured CPU cost it 2 % of its time here, as
    much as this VM's host, and the wake-ups alone 0.15 %. `pass_fds`:
    descriptors the probe inherits (a noise run's events: probes.noise)."""
    if on_tick is not None and away and not os.sched_getaffinity(0) - away:
        on_tick(0.0)
        on_tick = None
    argv = [str(probe_path()), command, *args]
    limit = expected_s * 1.5 + 30
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                            pass_fds=pass_fds)  # fmt: skip
    moved = step_aside(away)
    try:
        out, err, interrupted = _wait(proc, command, start, limit, on_tick)
    finally:
        step_back(moved)
        # Whatever went wrong here (a second Ctrl-C, say), no probe is left spinning.
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return _finish(command, proc.returncode, out, err, interrupted)


def _wait(
    proc: subprocess.Popen[str],
    command: str,
    start: float,
    limit: float,
    on_tick: Callable[[float], None] | None,
) -> tuple[str, str, bool]:
    while True:
        try:
            # Each tick wakes quietcore, perhaps on a CPU the probe measures: none without a listener.
            wait = 0.2 if on_tick else max(limit - (time.monotonic() - start), 0.01)
            out, err = proc.communicate(timeout=wait)
            return out, err, False
        except subprocess.TimeoutExpired as timeout:
            elapsed = time.monotonic() - start
            if on_tick:
                on_tick(elapsed)
            if elapsed > limit:
                raise CommandError(
                    f"quietcore-probe {command} ran {elapsed:.0f} s, over its {limit:.0f} s limit: killed"
                ) from timeout
        except KeyboardInterrupt:
            # The probe stops on SIGINT and prints what it measured so far.
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=limit)
            return out, err, True


def _finish(command: str, code: int, out: str, err: str, interrupted: bool) -> ProbeResult:
    if interrupted and (code < 0 or not out.strip()):
        # A workload without a SIGINT handler just ends: nothing to keep.
        raise Interrupted(f"interrupted during quietcore-probe {command}")
    if code < 0:
        raise CommandError(f"quietcore-probe {command} was killed by signal {-code}")
    if not out.strip():
        raise CommandError(f"quietcore-probe {command} failed (exit {code}): {err.strip() or 'no output'}")
    envelope = parse_envelope(out)
    if code != 0:
        message = (envelope.get("error") or {}).get("message") or err.strip()
        if code == 2:
            raise UsageError(message)
        raise CommandError(message, exit_code=3 if code == 3 else 1)
    result = envelope.get("result") or {}
    return ProbeResult(envelope, out, interrupted or bool(result.get("interrupted")))

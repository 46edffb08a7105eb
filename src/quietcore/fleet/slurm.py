"""Drain this node in Slurm when its check fails, and resume it when a later
check passes, but only from a drain of quietcore's own (its reason starts
with `quietcore:`), as LBNL NHC does with its `NHC:` notes: a node an admin
or another check drained stays drained."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess

from quietcore.errors import CommandError, UsageError

REASON = "quietcore:"
#: scontrol from the system's directories, never $PATH (root runs this; a health check's
#: environment is slurmd's); /opt/slurm/bin is where source builds put it.
SEARCH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/slurm/bin"
REASON_MAX = 200  # characters: a reason is a line in sinfo -R, not a report
TIMEOUT_S = 20


def scontrol() -> str:
    found = shutil.which("scontrol", path=SEARCH)
    if found is None:
        raise UsageError(f"--slurm-drain needs scontrol (looked in {SEARCH})")
    return found


def node_name(option: str | None) -> str:
    """--slurm-node; else the name slurmd gives its HealthCheckProgram, prolog and
    epilog ($SLURMD_NODENAME, the one variable of their environment); else this
    host's short name (Slurm's NodeName as most sites write it). Checked either way:
    it goes to scontrol."""
    name = option or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", name):
        raise UsageError(f"invalid --slurm-node {name!r} (valid: a Slurm node name: letters, digits, '.', '_', '-')")
    return name


def _run(binary: str, *args: str) -> str:
    try:
        done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandError(f"scontrol {args[0]}: {exc}", 3) from exc
    if done.returncode:
        raise CommandError(f"scontrol {' '.join(args[:2])}: {(done.stderr or done.stdout).strip()[:200]}", 3)
    return done.stdout


def state(binary: str, node: str) -> tuple[set[str], str]:
    """The node's state flags (IDLE, DRAIN, ...) and its reason, without Slurm's [user@time] tail."""
    return parse_node(_run(binary, "show", "node", node, "--oneliner"))


def parse_node(out: str) -> tuple[set[str], str]:
    """`scontrol show node NAME --oneliner`'s state flags and reason."""
    flags = re.search(r"\bState=(\S+)", out)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*@[^\]]*\])?\s*(?:$|\n)", out)
    return (set(flags.group(1).split("+")) if flags else set(), reason.group(1).strip() if reason else "")


def act(binary: str, node: str, passed: bool, line: str) -> str:
    """Drain on a failure, resume on a pass from quietcore's own drain; say what was done."""
    flags, reason = state(binary, node)
    drained = bool(flags & {"DRAIN", "DRAINED", "DRAINING"})
    if not passed:
        if drained and not reason.startswith(REASON):
            return f"Slurm: {node} is already drained by someone else ({reason or 'no reason'}): left so"
        why = f"{REASON} {line}"[:REASON_MAX]
        _run(binary, "update", f"NodeName={node}", "State=DRAIN", f"Reason={why}")
        return f"Slurm: drained {node}: {why}"
    if drained and reason.startswith(REASON):
        _run(binary, "update", f"NodeName={node}", "State=RESUME")
        return f"Slurm: resumed {node} (drained by quietcore: {reason[len(REASON) :].strip()})"
    if drained:
        return f"Slurm: {node} stays drained: its reason is not quietcore's ({reason or 'no reason'})"
    return ""

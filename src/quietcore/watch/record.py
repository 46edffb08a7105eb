"""A job's account, once it has ended, as a session of the results database: one run of kind "job", tagged
job=ID, that `results list --kind job`, `results show job_ID` and `report` read."""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import Any

from quietcore.attribution.intruders import Use
from quietcore.attribution.remedy import remedy
from quietcore.facts.cpulist import cpus_phrase, format_cpulist
from quietcore.runs.model import Run
from quietcore.safe import plain
from quietcore.store import sessions
from quietcore.watch.charge import NO_JOB, Charge

KIND = "job"
#: Sources kept in a job's record; the rest summed as one
TOP = 50
#: Sources named in a job's line
SHOWN = 3


def line(c: Charge, how: str = "as it ended") -> str:
    """A job's account in one sentence, for a log, an Epilog's output and AdminComment."""
    share = c.taken_ns / c.traced_ns if c.traced_ns else 0.0
    largest = ", ".join(f"{plain(s.name)} {s.ns / 1e6:,.1f} ms" for s in c.ranked()[:SHOWN]) or "nothing"
    name = f"Job {plain(c.job)}" if c.job != NO_JOB else "No job"
    return (f"{name}, {cpus_phrase(c.cpus)}, {how}: the OS took {c.taken_ns / 1e6:,.1f} ms, "
            f"{share:.2%} of its CPUs' time. Largest: {largest}.")  # fmt: skip


def fixes(c: Charge) -> dict[str, str]:
    """What would keep each source it met alone away, as `intruders` says it: by source name."""
    cpus = format_cpulist(c.cpus)
    out: dict[str, str] = {}
    for s in c.ranked()[:TOP]:
        if s.kind == "other":
            continue
        out[f"{s.kind} {s.name}"] = remedy(Use(s.kind, s.name.split(" (job ", 1)[0])).line(cpus)
    return out


def store(conn: sqlite3.Connection, facts: dict[str, Any], fingerprint: str, c: Charge, started: str,
          cgroup: str) -> int:  # fmt: skip
    """The job's session, stored whole: its id."""
    params = {"job": c.job, "cpus": sorted(c.cpus), "cgroup": "/" + cgroup.lstrip("/")}
    analysis = {**c.to_json(TOP), "fixes": fixes(c), "line": line(c)}
    ended = sessions.now_iso()
    envelope = {"format": "quietcore-job", "command": "watch", "start": started, "end": ended, "result": params}
    run = Run(KIND, params, started, ended, envelope, json.dumps(envelope), analysis=analysis)
    return sessions.create_session(conn, "watch", ["quietcore", *sys.argv[1:]], facts, fingerprint,
                                   {"job": c.job}, started_at=started, runs=[run])  # fmt: skip

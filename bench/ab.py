"""Two versions of quietcore's analysis on the same stored sessions: the
time of each, interleaved, and whether they store the same analysis, byte
for byte. For a change to the analysis (stats.periodicity, stats.fold,
attribution.noise) that means to keep its results: install each version
into a directory of its own, then give both.

    git worktree add /tmp/wt HEAD~1 && pip install --no-deps --target /tmp/before /tmp/wt
    pip install --no-deps --target /tmp/after .
    python bench/ab.py --before /tmp/before --after /tmp/after DB [DB ...] [--session 1] [--rounds 3]

Each round runs the two sides one after the other in processes of their
own (PYTHONPATH the side's directory), each analysing every noise run of
the session as `quietcore results analyse` does (measure.reanalysed), but
its CPUs in turn in that one process, the heap kept as the CLI keeps it:
the CPU time of each wave (the first scouts, the second, the CPUs past
them) is its own, not a pool's. Printed for each database: both sides'
CPU time over the rounds, the ratio of the medians (after / before: the
peer measured in the same run), and "same bytes" or where the two differ.
Exit status 1 when any database's analyses differ."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any


def child(db: str, session: str) -> None:
    """The analysis of `session`'s noise runs in this process (quietcore from PYTHONPATH): a JSON line of
    each wave's CPU time (ms), the whole's, the CPUs, and the SHA-256 of the analyses (sorted keys)."""
    import sqlite3
    import time

    from quietcore import measure
    from quietcore.attribution import noise
    from quietcore.heap import keep_freed_memory
    from quietcore.store import sessions

    keep_freed_memory()
    noise.PARALLEL_FROM = noise.SCOUTS_PARALLEL_FROM = 10**9  # the CPUs in turn: each one's time is its own
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    row = sessions.find_session(conn, session)
    runs = [r for r in sessions.runs_of(conn, row.id) if r.kind == "noise" and r.trace is not None]
    if not runs:
        sys.exit(f"session {session} of {db} has no spin-mode noise run")
    stamps: list[float] = []
    analyze = measure.analyze

    def marked(*args: Any, **kwargs: Any) -> Any:
        kwargs["on_cpu"] = lambda _: stamps.append(time.process_time())
        return analyze(*args, **kwargs)

    # measure.reanalysed takes no on_cpu, and the version before may be one older than any that would: its
    # analysis is marked where every version has called it, as bench/manycpu.py's split() marks an import's
    measure.analyze = marked  # type: ignore[assignment]
    digest = hashlib.sha256()
    waves = [0.0, 0.0, 0.0]
    cpus = 0
    start = time.process_time()
    for run in runs:
        stamps.clear()
        analysis = measure.reanalysed(run, row.facts, {"session": row.id, "uuid": row.uuid, "run": run.seq}).analysis
        ends = [*stamps[1:], time.process_time()]
        for k, (a, b) in enumerate(zip(stamps, ends, strict=True)):
            # a run of SCOUTS CPUs or fewer has no waves: every CPU searched in full, counted with the first
            first = k < noise.FIRST_SCOUTS or len(stamps) <= noise.SCOUTS
            waves[0 if first else 1 if k < noise.SCOUTS else 2] += (b - a) * 1e3
        cpus += len(stamps)
        digest.update(json.dumps(analysis, sort_keys=True, default=str).encode())
    print(json.dumps({"ms": (time.process_time() - start) * 1e3, "waves": waves, "cpus": cpus,
                      "sha256": digest.hexdigest()}))  # fmt: skip


def side(where: Path, db: Path, session: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(where)}
    proc = subprocess.run([sys.executable, __file__, "--child", str(db), session], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    if proc.returncode:
        sys.exit(f"{where} on {db}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
    out: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="a directory quietcore is installed in (pip install --target)")
    parser.add_argument("--after", type=Path, help="the same, of the version to compare")
    parser.add_argument("--session", default="1", help="the session of each database (default 1)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the two sides one after the other (3)")
    parser.add_argument("--child", nargs=2, metavar=("DB", "SESSION"), help=argparse.SUPPRESS)
    parser.add_argument("db", nargs="*", type=Path, help="results databases holding a noise session")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    for name in ("before", "after"):
        where = getattr(args, name)
        if where is None or not (where / "quietcore" / "__init__.py").is_file():
            parser.error(f"--{name} {where}: not a directory quietcore is installed in (pip install --target DIR)")
    if not args.db or args.rounds < 1:
        parser.error("give at least one database, and --rounds 1 or more")
    differ = False
    for db in args.db:
        if not db.is_file():
            parser.error(f"{db}: no such database")
        got: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for name in ("before", "after"):
                got[name].append(side(getattr(args, name), db, args.session))
        before = [r["ms"] for r in got["before"]]
        after = [r["ms"] for r in got["after"]]
        cpus = got["before"][0]["cpus"]
        same = {r["sha256"] for r in got["before"]} == {r["sha256"] for r in got["after"]}
        stable = len({r["sha256"] for r in got["before"] + got["after"]}) <= 2
        differ |= not same
        waves = [statistics.median(r["waves"][k] for r in got["after"]) for k in range(3)]
        ratio = statistics.median(after) / statistics.median(before)
        verdict = "same bytes" if same else "the analyses DIFFER" + ("" if stable else " (and from round to round)")
        print(f"{db} (session {args.session}, {cpus} CPUs): before {min(before):,.0f}-{max(before):,.0f} ms, after "
              f"{min(after):,.0f}-{max(after):,.0f} ms of CPU; after / before {ratio:.3f} (medians of "
              f"{args.rounds}); after, by wave: first scouts {waves[0]:,.0f} ms, second {waves[1]:,.0f}, the CPUs "
              f"past them {waves[2]:,.0f}; {verdict}")  # fmt: skip
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

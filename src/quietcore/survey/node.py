"""One rank's part of a survey, and rank 0's: measure this node's CPUs at
the common moment, reduce on the node (the analysis runs here, and only a
summary, its analysis and the capped events travel), gather to rank 0,
which alone writes the database."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from quietcore.audit import run_checks
from quietcore.audit.context import AuditContext
from quietcore.errors import QuietcoreError
from quietcore.facts.cpulist import format_cpulist
from quietcore.facts.root import Root
from quietcore.facts.tasks import irqbalance_running, read_tasks
from quietcore.facts.virt import label
from quietcore.fleet.baseline import cpu_noise
from quietcore.probes.noise import NoiseOptions
from quietcore.report import text
from quietcore.report.kinds.survey import describe, verdict_text
from quietcore.runs.model import Run
from quietcore.runs.reference import CpuNoise
from quietcore.runs.trace import NoiseTrace
from quietcore.stats.percentiles import tail
from quietcore.store.sessions import now_iso
from quietcore.survey import clock
from quietcore.survey.gather import gather_arrays
from quietcore.survey.odd import (
    NodeSummary,
    audit_diff,
    config_diff,
    odd_count,
    odd_nodes,
    summary_of,
)

SLURM = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_NODEID")


@dataclass
class Mine:
    """What this rank measured, ready to send."""

    payload: dict[str, Any]  # the run without its events, and this node's place and configuration
    events: np.ndarray  # (cpu, start_ns, duration_ns) triples, flat
    error: str | None = None
    offsets: tuple[list[clock.Offset], list[clock.Offset]] = field(default_factory=lambda: ([], []))
    # this rank's first CPU, all its gaps (starts from the measurement's start) and span: for the prediction
    trace: tuple[np.ndarray, np.ndarray, float] | None = None
    coupled: list[dict[str, Any]] = field(default_factory=list)
    cpus: list[CpuNoise] = field(default_factory=list)  # this rank's CPUs with their gaps, for --prometheus
    network: dict[str, Any] | None = None  # rank 0: L, o and G by ping-pong (survey.network)


def config_of(facts: dict[str, Any]) -> dict[str, str]:
    """The configuration fields a survey sets side by side across nodes."""

    kernel, cpu, virt = facts["kernel"], facts["cpu"], facts["virtualization"]
    return {
        "kernel": str(kernel["release"]),
        "preemption": f"{kernel.get('preempt_build') or '?'}{' (dynamic)' if kernel.get('preempt_dynamic') else ''}",
        "cmdline": str(facts["cmdline"]),
        "clocksource": str(facts.get("clocksource")),
        "thp": str(facts["thp"]["enabled"]),
        "thp_defrag": str(facts["thp"]["defrag"]),
        "governors": ",".join(cpu["governors"]) or "none",
        "isolated": cpu["isolated"] or "none",
        "nohz_full": cpu["nohz_full"] or "none",
        "smt": str(cpu["smt"]),
        "irqbalance": "running" if irqbalance_running(read_tasks(Root("/"))) else "stopped",
        "virtualization": label(virt),
    }


def _shared(comm: Any, cpus: frozenset[int]) -> list[str]:
    """Ranks of this host whose CPUs overlap another's: they time-share a
    CPU and measure each other. A warning in the result, not an error."""
    everyone = comm.allgather((socket.gethostname(), sorted(cpus)))
    out = []
    for a, (host_a, cpus_a) in enumerate(everyone):
        for b, (host_b, cpus_b) in enumerate(everyone[a + 1 :], start=a + 1):
            common = set(cpus_a) & set(cpus_b)
            if host_a == host_b and common:
                out.append(f"ranks {a} and {b} on {host_a} share CPUs {format_cpulist(frozenset(common))}: each "
                           "measures the other (bind them: mpirun --bind-to core, srun --cpu-bind=cores)")  # fmt: skip
    return out


def _strip_events(envelope: dict[str, Any], send: int, trace: NoiseTrace | None) -> tuple[np.ndarray, list[float]]:
    """Take the events out of the envelope (they travel as numpy buffers),
    the `send` longest of this rank's if it has more, in time order; each
    CPU's entry says how many it had and sent. Returns the flat triples and
    every gap length (all of them: the node's p99.9 is its own). A CPU's
    events are the run's trace's (the probe's arrays, or the envelope's
    pairs: runs.trace); fwq and ftq runs have none."""
    triples, every = [], []
    traced = {t.cpu: t for t in trace.cpus} if trace is not None else {}
    for c in envelope.get("result", {}).get("cpus", []):
        mine = traced.get(int(c["cpu"]))
        pairs = np.column_stack([mine.start_ns, mine.duration_ns]) if mine is not None else np.empty((0, 2))
        c["events"] = []
        every.append(pairs[:, 1])
        triples.append(np.column_stack([np.full(len(pairs), float(c["cpu"])), pairs]))
    flat = np.concatenate(triples) if triples else np.empty((0, 3))
    if len(flat) > send:  # the longest, which the odd-node rule and the heatmap look at
        keep = np.sort(np.argpartition(flat[:, 2], len(flat) - send)[len(flat) - send :])
        flat = flat[keep]
    for c in envelope.get("result", {}).get("cpus", []):
        c["events_sent"] = int(np.count_nonzero(flat[:, 0] == float(c["cpu"])))
    gaps = np.concatenate(every) if every else np.empty(0)
    return flat.ravel(), gaps.tolist()


def audit_of() -> dict[str, tuple[str, str]]:
    """This node's audit, as finding id -> (status, summary)."""

    return {f.id: (f.status.value, f.summary) for f in run_checks(AuditContext(Root("/")))}


def measure(comm: Any, mode: str, duration: float, max_events: int, send: int, keep: bool = False) -> Mine:
    """Collective: every rank calls it."""
    from quietcore.measure import Measurer

    cpus = frozenset(os.sched_getaffinity(0))
    warnings = _shared(comm, cpus)
    start = clock.estimate(comm)
    error, run, measurer, options = None, None, None, None
    try:
        measurer = Measurer(Root("/"))
        options = NoiseOptions(cpus, duration, max_events=max_events, mode=mode)
    except QuietcoreError as exc:
        error = str(exc)
    comm.Barrier()  # every rank starts together: the noise is measured at one moment across the job
    if measurer is not None and options is not None:
        try:
            run = measurer.noise(options, trace="off")
        except QuietcoreError as exc:
            error = str(exc)
    end = clock.estimate(comm)
    place = {"rank": comm.Get_rank(), "host": socket.gethostname(), "cpus": format_cpulist(cpus),
             "slurm": {k: os.environ[k] for k in SLURM if k in os.environ}, "warnings": warnings}  # fmt: skip
    if run is None or measurer is None:
        return Mine({"place": place, "error": error}, np.empty(0), error, (start, end))
    trace = None
    if run.trace is not None and run.trace.cpus:
        first = run.trace.cpus[0]
        trace = (first.start_ns - first.span_start_ns, first.duration_ns, first.measured_ns)
    envelope = json.loads(run.text)
    flat, gaps = _strip_events(envelope, send, run.trace)
    data = run.to_dict(json.dumps(envelope))  # the events travel apart, as numpy buffers
    p999 = tail(gaps, 0.999)  # None from fewer than 1,000 gaps (stats.percentiles)
    p999 = p999 / 1e3 if p999 is not None else None
    payload = {"place": place, "run": data, "fingerprint": measurer.fingerprint, "config": config_of(measurer.facts),
               "p999_us": p999}  # fmt: skip
    return Mine(payload, flat, None, (start, end), trace, cpus=cpu_noise(run, keep_gaps=True) if keep else [])


def publish(comm: Any, mine: Mine, where: Path) -> str | None:
    """Collective: each node's first rank writes the node's metrics file, with every
    CPU its ranks measured (`--prometheus`: each node writes its own)."""
    from quietcore.fleet import prometheus  # prometheus_client: see quietcore.lazy

    host = socket.gethostname()
    hosts = comm.allgather(host)
    local = comm.Split(hosts.index(host), comm.Get_rank())
    try:
        got = local.gather(mine.cpus, root=0)
        first = local.Get_rank() == 0
    finally:
        local.Free()
    if not first or got is None:
        return None
    config = mine.payload.get("config") or {}
    cpus = sorted((c for part in got for c in part), key=lambda c: c.cpu)
    snap = prometheus.Snapshot("survey", str(mine.payload.get("fingerprint", "")), str(config.get("kernel", "")),
                               str(config.get("virtualization", "")), time.time(), cpus)  # fmt: skip
    return str(prometheus.write(where, snap))


@dataclass
class Gathered:
    payloads: list[dict[str, Any]]
    events: list[np.ndarray]
    start: list[clock.Offset]
    end: list[clock.Offset]
    rounds: int
    coupled: list[dict[str, Any]] = field(default_factory=list)
    network: dict[str, Any] | None = None


def collect(comm: Any, mine: Mine) -> Gathered | None:
    """Collective: rank 0 gets every rank's payload and events."""
    payloads = comm.gather(mine.payload, root=0)
    events, rounds = gather_arrays(comm, mine.events)
    if comm.Get_rank() != 0:
        return None
    assert payloads is not None and events is not None
    return Gathered(payloads, events, mine.offsets[0], mine.offsets[1], rounds, mine.coupled, mine.network)


def _with_events(data: dict[str, Any], flat: np.ndarray) -> dict[str, Any]:
    envelope = json.loads(data["envelope"])
    triples = flat.reshape(-1, 3)
    for c in envelope.get("result", {}).get("cpus", []):
        mine = triples[triples[:, 0] == float(c["cpu"])]
        c["events"] = mine[:, 1:].tolist()
        # What the node kept of its events is what the stored run has: its summary counted them all.
        c["events_dropped"] = int(c.get("events_dropped", 0)) + int(c.get("events_recorded", 0)) - len(mine)
        c["events_recorded"] = len(mine)
    return data | {"envelope": json.dumps(envelope)}


def store(where: tuple[Path, bool], tags: dict[str, str], got: Gathered) -> tuple[int, dict[str, Any]]:
    """Rank 0: one session, a run per rank, and the survey's own run, in the
    database `where` (its path, and whether the user chose it)."""
    from quietcore.session import Session

    path, chosen = where
    started = now_iso()
    nodes: list[dict[str, Any]] = []
    summaries: list[NodeSummary] = []
    failed = []
    with Session("survey", path, chosen, tags, Root("/")) as session:
        for payload, flat, s, e in zip(got.payloads, got.events, got.start, got.end, strict=True):
            place = payload["place"]
            name = f"{place['host']}:{place['rank']}"
            offsets = {"start_ns": s.offset_ns, "end_ns": e.offset_ns, "uncertainty_ns": max(s.uncertainty_ns,
                       e.uncertainty_ns), "tries": s.tries + e.tries, "drift_ppm": _ppm(s, e),
                       "start_at_ns": s.at_ns, "end_at_ns": e.at_ns}  # fmt: skip
            if "run" not in payload:
                failed.append(f"{name}: {payload.get('error')}")
                nodes.append({"name": name, **place, "clock": offsets, "error": payload.get("error")})
                continue
            run = Run.from_dict(_with_events(payload["run"], flat))
            run.params = {**run.params, "survey": {**place, "clock": offsets, "fingerprint": payload["fingerprint"]}}
            session.add(run)
            summary = summary_of(name, run.summary, run.noise, payload["p999_us"], payload["config"])
            summaries.append(summary)
            nodes.append({"name": name, **place, "clock": offsets, "fingerprint": payload["fingerprint"],
                          "config": payload["config"], "figures": summary.figures, "sources": summary.sources,
                          "run_seq": run.seq})  # fmt: skip
        virtual = bool(summaries) and all(n.config.get("virtualization", "none") != "none" for n in summaries)
        notes = ["every node is a virtual machine. A single gap, the max or the p99.9, is as likely the host's "
                 "stall of that vCPU, so it does not make a node odd here. The time lost and periodic sources do."
                 ] if virtual else []  # fmt: skip
        verdicts = {v.name: v for v in odd_nodes(summaries, gaps=not virtual)}
        for n in nodes:
            v = verdicts.get(n["name"])
            n["odd"], n["differs"], n["reasons"] = (v.odd, v.differs, v.reasons) if v else (False, False, [])
        audits = {f"{p['place']['host']}:{p['place']['rank']}": p["audit"] for p in got.payloads if "audit" in p}
        survey = {"ranks": len(got.payloads), "nodes": nodes, "config_diff": config_diff(summaries),
                  "audit": audit_diff(audits) if audits else None,
                  "gather_rounds": got.rounds, "failed": failed, "notes": notes, "coupled": got.coupled,
                  "network": got.network,
                  "warnings": sorted({w for p in got.payloads for w in p["place"]["warnings"]})}  # fmt: skip
        session.record("survey", {"ranks": len(got.payloads)}, started, {}, survey)
        session_id = session.id
    return session_id, survey


def _ppm(s: clock.Offset, e: clock.Offset) -> float:
    span = e.at_ns - s.at_ns
    return (e.offset_ns - s.offset_ns) / span * 1e6 if span > 0 else 0.0


def show(session_id: int, survey: dict[str, Any]) -> None:
    """The survey as a person reads it, through the presentation layer (report.screen): the nodes' table
    fitted to the width, every sentence wrapped (a hand-padded table ran to 191 columns in a file)."""
    # no escape codes: under mpirun, rank 0's stdout is a pseudo-terminal of Open MPI's whatever mpirun's own
    # stdout is (its bold headers reached a batch job's log as escape codes). Its width is the user's terminal's:
    # Open MPI gives it that size (80 in a terminal of 80, where a file's 100 columns had split its lines)
    out = text.console(color_system=None)
    table = Table(title=None)
    for name in ("rank", "host", "CPUs", "clock offset", "noise", "max gap", "events/s", "verdict"):
        table.add_column(name, justify="left" if name in ("host", "CPUs", "verdict") else "right")
    for n in survey["nodes"]:
        c = n["clock"]
        offset = f"{c['start_ns'] / 1e3:,.1f} ± {c['uncertainty_ns'] / 1e3:.1f} µs"
        if "figures" not in n:
            table.add_row(str(n["rank"]), n["host"], n["cpus"], offset, "-", "-", "-", f"failed: {n['error']}")
            continue
        f = n["figures"]
        table.add_row(str(n["rank"]), n["host"], n["cpus"], offset, f"{f['noise fraction']:.3f} %",
                      f"{f['max gap']:,.1f} µs", f"{f['events']:,.0f}", verdict_text(n))  # fmt: skip
    out.print(table)
    for name, diffs in survey["config_diff"].items():
        out.print(f"{name}: {'; '.join(diffs)}")
    if survey.get("audit") is not None:
        differ = survey["audit"]
        out.print(f"Audit: {len(differ)} finding{'s' if len(differ) != 1 else ''} differ between nodes"
                  + (":" if differ else " (each node's own audit: quietcore audit)"))  # fmt: skip
        for f in differ:
            out.print(f"  {f['id']}: " + "; ".join(f"{status} on {', '.join(names)}"
                                                   for status, names in f["statuses"].items()))  # fmt: skip
    if survey.get("network"):
        out.print(describe(survey["network"]))
    for note in survey["notes"]:
        out.print(f"Note: {note}")
    for w in survey["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    if survey["coupled"]:
        out.print("Coupled: a work quantum then an Allreduce, on the first N ranks. Slowdown is the mean over the "
                  "minimum iteration, predicted from rank 0's trace: the max of N in closed form, and simulated in "
                  "the fast and the round model.")  # fmt: skip
        coupled_table = Table(title=None)
        for name in ("W µs", "ranks", "iterations", "ideal µs", "measured", "max of N", "fast", "rounds"):
            coupled_table.add_column(name, justify="right")
        for r in survey["coupled"]:
            sims = [f"{r[k]:.3f}" if k in r else "-" for k in ("fast", "rounds")]
            coupled_table.add_row(f"{r['work_us']:,}", str(r["ranks"]), f"{r['iterations']:,}",
                                  f"{r['ideal_ns'] / 1e3:,.1f}", f"{r['slowdown']:.3f}", f"{r['predicted']:.3f}",
                                  *sims)  # fmt: skip
        out.print(coupled_table)
    out.print(f"{odd_count(survey)}. Clock offsets to rank 0 are by ping-pong, ± half the best round trip. "
              f"Saved as session {session_id}.")  # fmt: skip

"""Measuring on this node without a database: fingerprint the node, run a
probe (with the kernel's counters read around it and the tracer when it can
be had), analyse, and return a typed Run. A session stores such runs; a
cluster rank can hand them to another process instead."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from quietcore.attribution import busy, counters, explain, intruders, tracer
from quietcore.attribution.noise import analyze, traced_names
from quietcore.errors import CommandError
from quietcore.facts.cpulist import format_cpulist
from quietcore.facts.devices import irq_owners
from quietcore.facts.fingerprint import collect_facts, fingerprint
from quietcore.facts.procstat import steal_delta_ns
from quietcore.facts.root import Root
from quietcore.facts.topology import places, read_topology
from quietcore.owner import own_threads
from quietcore.peers.traces import CpuGaps
from quietcore.probes.noise import NoiseOptions, run_noise, summary_rows
from quietcore.probes.runner import ProbeResult, run_probe
from quietcore.runs import events
from quietcore.runs.model import Run
from quietcore.runs.trace import NoiseTrace
from quietcore.store.sessions import now_iso

Analyzer = Callable[[dict[str, Any]], dict[str, Any]]


def _spans(result: dict[str, Any], text: str, clock: str) -> list[tracer.Interval]:
    """The trace's spans, in ns from the probe's origin (none without a trace)."""
    if not text:
        return []
    return tracer.intervals(text, tracer.converter(clock, result["origin"], result["counter"]["hz"]))


def _matched(trace: NoiseTrace, spans_of: Callable[[int], list[tracer.Interval]]
             ) -> tuple[list[dict[str, Any]], dict[int, list[str | None]]]:  # fmt: skip
    """Each CPU's gaps matched to the spans `spans_of` gives for it (tracer.match_and_lead): the matchings, and each
    CPU's gaps' leaders."""
    matched, leaders = [], {}
    for c in trace.cpus:
        m, leaders[c.cpu] = tracer.match_and_lead(c.cpu, c.start_ns, c.duration_ns, spans_of(c.cpu))
        matched.append(m)
    return matched, leaders


def _matched_each(session: tracer.TraceSession, trace: NoiseTrace, result: dict[str, Any]
                  ) -> tuple[list[dict[str, Any]], dict[int, list[str | None]], int]:  # fmt: skip
    """_matched, one CPU's buffer read and its spans found at a time (the session stopped): the node's whole
    text and every span at once took some 500 bytes a gap of a traced run's memory. And how many spans."""
    to_ns = tracer.converter(session.clock, result["origin"], result["counter"]["hz"])
    count = 0

    def spans_of(cpu: int) -> list[tracer.Interval]:
        nonlocal count
        mine = tracer.intervals(session.read_cpu(cpu), to_ns)
        count += len(mine)
        return mine

    return *_matched(trace, spans_of), count


def _traced(matched: list[dict[str, Any]], spans: int, recorded: bool, why_not: str, clock: str) -> dict[str, Any]:
    """The tracer's attribution per CPU (tracer.match_and_lead's), or why there is none."""
    if why_not or not recorded:
        return {"used": None, "why": why_not or "no trace was recorded", "osnoise": tracer.osnoise_state()}
    return {"used": "tracepoints", "clock": clock, "spans": spans, "osnoise": tracer.osnoise_state(), "cpus": matched}


def analyse_noise(trace: NoiseTrace, before: counters.CounterSnapshot, after: counters.CounterSnapshot, *,
                  config_hz: int | None, virtualized: bool, user_hz: int,
                  on_cpu: Callable[[int], None] | None = None,
                  leaders: dict[int, list[str | None]] | None = None) -> dict[str, Any]:  # fmt: skip
    """The analysis of a noise trace, the one path for every noise run: one the
    probe measured, or traces imported (`results import --from trace`, whose
    counters are none). A failed analysis is recorded, not fatal: the
    measurement stands."""
    try:
        return analyze(trace, before, after, config_hz=config_hz, virtualized=virtualized, user_hz=user_hz,
                       on_cpu=on_cpu, leaders=leaders)  # fmt: skip
    except (ValueError, ArithmeticError, IndexError, np.linalg.LinAlgError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def reanalysed(run: Run, facts: dict[str, Any], source: dict[str, Any]) -> Run:
    """A stored noise run analysed again by today's code (analyse_noise), its
    counters as the stored analysis kept them (counters.from_stored); the
    tracer's match and the explained gaps, which need the trace's text, are
    kept as they were. `source` names the run it came from."""
    assert run.trace is not None
    user_hz = int(run.context.get("user_hz") or 100)
    before, after = counters.from_stored(list(run.analysis.get("cpus") or ()), run.context.get("steal_ns") or {},
                                         user_hz)  # fmt: skip
    config = str((facts.get("kernel") or {}).get("config", {}).get("CONFIG_HZ") or "")
    virtualized = bool((facts.get("virtualization") or {}).get("virtualized"))
    analysis = analyse_noise(run.trace, before, after, config_hz=int(config) if config.isdigit() else None,
                             virtualized=virtualized, user_hz=user_hz)  # fmt: skip
    for kept in ("tracer", "explained", "stopped"):
        if kept in run.analysis:
            analysis[kept] = run.analysis[kept]
    traced_names(analysis, run.analysis)
    busy.apply(analysis, {int(c): tasks for c, tasks in (run.analysis.get("busy") or {}).items()})
    return Run("noise", {**run.params, "analysed_from": source}, run.started, run.ended, run.envelope, run.text,
               run.status, context=run.context, analysis=analysis, summary=run.summary,
               stored=run.stored)  # fmt: skip


def imported_noise(gaps: list[CpuGaps], span_ns: float, source: str,
                   on_cpu: Callable[[int], None] | None = None) -> list[tuple[str, int, Run]]:  # fmt: skip
    """Traces read from files (peers.traces) as noise runs, one a node and rank,
    analysed as a measured run is (analyse_noise), with no counters: every CPU's
    lost time unexplained by them, its periodic sources unnamed."""
    started = now_iso()
    nodes: dict[tuple[str, int], list[CpuGaps]] = {}
    for g in gaps:
        nodes.setdefault((g.host, g.rank), []).append(g)
    empty = counters.CounterSnapshot({}, {}, {}, {})
    out = []
    for (host, rank), mine in sorted(nodes.items()):
        cpus = []
        for g in sorted(mine, key=lambda g: g.cpu):
            lost = float(g.durations.sum())
            cpus.append({
                "cpu": g.cpu, "start_ns": 0.0, "measured_ns": span_ns, "loops": 0, "min_period_ns": 0.0,
                "median_period_ns": 0.0, "gaps": int(g.starts.size), "total_gap_ns": lost,
                "max_gap_ns": float(g.durations.max()), "lost_ns": lost, "available_pct": 100 * (1 - lost / span_ns),
                "events_per_s": g.starts.size / span_ns * 1e9, "events_dropped": 0,
                "events": [],
                "ctxsw": {"voluntary": 0, "involuntary": 0},
            })  # fmt: skip
        threshold = float(min(g.durations.min() for g in mine))
        result = {"mode": "spin", "threshold": {"ns": threshold}, "cpus": cpus}
        envelope = {"format": "quietcore-trace-import", "command": "noise", "start": started, "end": started,
                    "result": result}  # fmt: skip
        params = {"imported": source, "cpus": format_cpulist(frozenset(g.cpu for g in mine)),
                  "duration_s": span_ns / 1e9,
                  "survey": {"host": host, "rank": rank}}  # fmt: skip
        run = Run("noise", params, started, now_iso(), envelope, json.dumps(envelope),
                  summary=summary_rows(result, {}),
                  stored=events.encode_many({g.cpu: (g.starts, g.durations) for g in mine}))  # fmt: skip
        # the arrays just encoded, not the blobs decoded again (0.7 s at 384 CPUs): encode is exact
        trace = NoiseTrace.from_result(result, arrays={g.cpu: (g.starts, g.durations) for g in mine})
        assert trace is not None
        run.analysis = analyse_noise(trace, empty, empty, config_hz=None, virtualized=False, user_hz=100,
                                     on_cpu=on_cpu)  # fmt: skip
        out.append((host, rank, run))
    return out


def from_probe(kind: str, params: dict[str, Any], started: str, probe: ProbeResult, **parts: Any) -> Run:
    status = "interrupted" if probe.interrupted else "complete"
    return Run(kind, params, started, now_iso(), probe.envelope, probe.text, status, arrays=probe.events, **parts)


def recorded(kind: str, params: dict[str, Any], started: str, envelope: dict[str, Any],
             analysis: dict[str, Any] | None = None) -> Run:  # fmt: skip
    """A run quietcore measured itself (a user's command, an experiment's
    table, an audit), with the same shape as a probe's."""
    return Run(kind, params, started, now_iso(), envelope, json.dumps(envelope), analysis=analysis or {})


class Measurer:
    """The node being measured: its facts and fingerprint, read once."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self.facts: dict[str, Any] = collect_facts(root)
        self.fingerprint = fingerprint(self.facts)

    @property
    def config_hz(self) -> int | None:
        value = self.facts["kernel"]["config"].get("CONFIG_HZ")
        return int(value) if value and str(value).isdigit() else None

    @property
    def virtualized(self) -> bool:
        return bool(self.facts["virtualization"]["virtualized"])

    def noise(
        self,
        options: NoiseOptions,
        on_tick: Callable[[float], None] | None = None,
        trace: str = "auto",
        on_step: Callable[[str], None] | None = None,
        explain_above_ns: float | None = None,
    ) -> Run:
        """Measure, with the counters read around the run, and analyse;
        on_step(what) as each step of the analysis starts. `explain_above_ns`:
        trace every CPU too, and explain each gap over it."""
        started = now_iso()
        trace_ok, trace_why = tracer.usable() if trace != "off" else (False, "--trace off")
        if trace == "on" and not trace_ok:
            raise CommandError(f"--trace on: {trace_why}", exit_code=3)
        if explain_above_ns is not None and not trace_ok:
            raise CommandError(f"--explain-above: {trace_why}", exit_code=3)
        step = on_step or (lambda what: None)
        trace_text, clock = "", ""
        each: tuple[list[dict[str, Any]], dict[int, list[str | None]], int] | None = None  # matched in the session
        # The counters are read right around the probe, inside the tracer's session: its setup and reading
        # took 1.4 s of a 2 s run here, the CPU idle meanwhile, and LOC counted over the 3.4 s read 188/s
        # for a 250 Hz tick, which was then named the host's. The threads are looked at outside the counters'
        # window (a look reads every task's stat: 5 ms here, more on a node of thousands of tasks).
        user_hz = os.sysconf("SC_CLK_TCK")

        def as_run(probe: ProbeResult, before: counters.CounterSnapshot, after: counters.CounterSnapshot) -> Run:
            steal = steal_delta_ns(before.cpu_times, after.cpu_times, user_hz)
            # where each CPU sits (socket, NUMA node, L3 group), so many CPUs are grouped as the node is
            context = {"steal_ns": {str(k): v for k, v in steal.items()}, "user_hz": user_hz,
                       "topology": places(read_topology(self.root), frozenset(options.cpus))}  # fmt: skip
            return from_probe("noise", options.params(), started, probe, context=context,
                              summary=summary_rows(probe.result, steal))  # fmt: skip

        if trace_ok and options.mode == "spin":
            # To explain a gap, the senders and wakers on the other CPUs too.
            where = None if explain_above_ns is not None else options.cpus
            events = tuple(dict.fromkeys(tracer.EVENTS + intruders.EVENTS)) if explain_above_ns else tracer.EVENTS
            stacks = intruders.stack_triggers(options.cpus) if explain_above_ns is not None else {}
            with tracer.TraceSession(where, events, triggers=stacks) as session:
                seen, before = busy.look(), counters.snapshot(self.root)
                probe = run_noise(options, on_tick)
                after, now = counters.snapshot(self.root), busy.look()
                session.stop()
                run, clock = as_run(probe, before, after), session.clock
                if explain_above_ns is not None:  # every CPU's lines at once, to tell the intruders
                    trace_text = session.read()
                elif run.trace is not None:  # a CPU's buffer at a time, before the session ends
                    step("matching gaps to the trace")
                    each = _matched_each(session, run.trace, run.result)
        else:
            seen, before = busy.look(), counters.snapshot(self.root)
            probe = run_noise(options, on_tick)
            after, now = counters.snapshot(self.root), busy.look()
            run = as_run(probe, before, after)
        if run.trace is not None:
            # the trace first: a periodic source is named by what its gaps held (attribution.noise)
            if each is None:
                step("matching gaps to the trace")
                spans = _spans(run.result, trace_text, clock) if trace_ok else []
                matched, by_cpu = _matched(run.trace, lambda cpu: spans) if trace_ok and trace_text else ([], {})
                each = matched, by_cpu, len(spans)
            matched, by_cpu, count = each
            leaders = by_cpu if count else None
            run.analysis = self._analyze(run.trace, before, after, user_hz, lambda cpu: step(f"analysing CPU {cpu}"),
                                         leaders)  # fmt: skip
            # a task that shared a measured CPU: named, and its time slices are no periodic source
            busy.apply(run.analysis, busy.busy(seen, now, {c.cpu: c.measured_ns for c in run.trace.cpus},
                                               own_threads() | {os.getpid()},
                                               {c.cpu: c.lost_ns for c in run.trace.cpus}))  # fmt: skip
            run.analysis["tracer"] = _traced(matched, count, bool(matched) or bool(trace_text),
                                             "" if trace_ok else trace_why, clock)  # fmt: skip
            if explain_above_ns is not None and trace_text:
                step("explaining the longest gaps")
                to_ns = tracer.converter(clock, run.result["origin"], run.result["counter"]["hz"])
                found = intruders.account(trace_text.splitlines(), options.cpus, to_ns, own=own_threads(),
                                          spawners=(os.getpid(),), episodes=True)  # fmt: skip
                found.name_devices(irq_owners(Root("/")))
                run.analysis["explained"] = explain.explain_gaps(explain.probe_gaps(run.trace), found, explain_above_ns)
                stopped = explain.stopped_at(run.result, run.trace)
                if stopped is not None:
                    run.analysis["stopped"] = stopped | {"trace": explain.window(trace_text, to_ns, stopped)}
        return run

    def _analyze(
        self,
        trace: NoiseTrace,
        before: counters.CounterSnapshot,
        after: counters.CounterSnapshot,
        user_hz: int,
        on_cpu: Callable[[int], None],
        leaders: dict[int, list[str | None]] | None = None,
    ) -> dict[str, Any]:
        return analyse_noise(trace, before, after, config_hz=self.config_hz, virtualized=self.virtualized,
                             user_hz=user_hz, on_cpu=on_cpu, leaders=leaders)  # fmt: skip

    def probe(
        self,
        command: str,
        args: list[str],
        params: dict[str, Any],
        expected_s: float,
        on_tick: Callable[[float], None] | None = None,
        analyze_result: Analyzer | None = None,
        away: frozenset[int] = frozenset(),
    ) -> Run:
        """Any probe subcommand as one run, with its analysis; `away`: the
        CPUs it runs on, which quietcore leaves meanwhile (probes.runner)."""
        started = now_iso()
        probe = run_probe(command, args, expected_s=expected_s, on_tick=on_tick, away=away)
        return from_probe(command, params, started, probe,
                          analysis=analyze_result(probe.result) if analyze_result else {})  # fmt: skip

    def calibrate(self, trials: int = 5, trial_ms: int = 100) -> Run:
        args = ["--trials", str(trials), "--trial-ms", str(trial_ms)]
        return self.probe("calibrate", args, {"trials": trials, "trial_ms": trial_ms}, trials * trial_ms / 1000)

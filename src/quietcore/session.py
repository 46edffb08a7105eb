"""A measuring session: open the store first (so a bad database fails before
anything is measured), fingerprint the node, record each run as it finishes,
and close the session as complete, failed or interrupted."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from quietcore.attribution import counters, tracer
from quietcore.attribution.noise import analyze
from quietcore.errors import CommandError, Interrupted
from quietcore.facts.fingerprint import collect_facts, fingerprint
from quietcore.facts.procstat import steal_delta_ns
from quietcore.facts.root import Root
from quietcore.probes.noise import NoiseOptions, run_noise, summary_rows
from quietcore.probes.runner import ProbeResult, run_probe
from quietcore.store import db, sessions


def _traced(result: dict[str, Any], text: str, clock: str, why_not: str) -> dict[str, Any]:
    """The tracer's attribution per CPU, or why there is none."""
    if why_not or not text:
        return {"used": None, "why": why_not or "no trace was recorded", "osnoise": tracer.osnoise_state()}
    to_ns = tracer.converter(clock, result["origin"], result["counter"]["hz"])
    spans = tracer.intervals(text, to_ns)
    cpus = [tracer.match_gaps(int(c["cpu"]), [(float(s), float(d)) for s, d in c["events"]], spans)
            for c in result["cpus"]]  # fmt: skip
    return {"used": "tracepoints", "clock": clock, "spans": len(spans), "osnoise": tracer.osnoise_state(), "cpus": cpus}


class Session:
    def __init__(self, command: str, db_path: Path, chosen: bool, tags: Mapping[str, str], root: Root) -> None:
        self.command = command
        self.db_path = db_path
        self.root = root
        self.conn: sqlite3.Connection = db.open_db(db_path, chosen=chosen)
        self.facts: dict[str, Any] = collect_facts(root)
        self.fingerprint = fingerprint(self.facts)
        self.id = sessions.create_session(
            self.conn, command, ["quietcore", *sys.argv[1:]], self.facts, self.fingerprint, tags
        )

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind in (KeyboardInterrupt, Interrupted):
            sessions.finish_session(self.conn, self.id, "interrupted", "stopped by the user")
        elif kind is not None:
            sessions.finish_session(self.conn, self.id, "failed", str(exc))
        else:
            sessions.finish_session(self.conn, self.id, "complete")
        self.conn.close()

    @property
    def config_hz(self) -> int | None:
        value = self.facts["kernel"]["config"].get("CONFIG_HZ")
        return int(value) if value and str(value).isdigit() else None

    @property
    def virtualized(self) -> bool:
        return bool(self.facts["virtualization"]["virtualized"])

    def _user_hz(self) -> int:
        return os.sysconf("SC_CLK_TCK")

    def noise(
        self, options: NoiseOptions, on_tick: Callable[[float], None] | None = None, trace: str = "auto"
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Measure, with /proc/stat read around the run for steal time.
        Returns the per-CPU summary rows and the probe's full result."""
        started = sessions.now_iso()
        trace_ok, trace_why = tracer.usable() if trace != "off" else (False, "--trace off")
        if trace == "on" and not trace_ok:
            raise CommandError(f"--trace on: {trace_why}", exit_code=3)
        before = counters.snapshot(self.root)
        trace_text, clock = "", ""
        if trace_ok and options.mode == "spin":
            with tracer.TraceSession(options.cpus) as session:
                probe = run_noise(options, on_tick)
                trace_text, clock = session.read(), session.clock
        else:
            probe = run_noise(options, on_tick)
        after = counters.snapshot(self.root)
        user_hz = self._user_hz()
        steal = steal_delta_ns(before.cpu_times, after.cpu_times, user_hz)
        rows = summary_rows(probe.result, steal)
        analysis: dict[str, Any] = {}
        if probe.result.get("mode", "spin") == "spin":
            try:
                analysis = analyze(
                    probe.result, before, after, config_hz=self.config_hz, virtualized=self.virtualized, user_hz=user_hz
                )
            except (ValueError, ArithmeticError, IndexError, np.linalg.LinAlgError) as exc:
                # The measurement stands; a failed analysis is recorded, not fatal.
                analysis = {"error": f"{type(exc).__name__}: {exc}"}
            analysis["tracer"] = _traced(probe.result, trace_text, clock, trace_why if not trace_ok else "")
        context = {"steal_ns": {str(k): v for k, v in steal.items()}, "user_hz": user_hz}
        self._store("noise", options.params(), started, probe, context, rows, analysis)
        return rows, {**probe.result, "analysis": analysis}

    def probe(
        self,
        command: str,
        args: list[str],
        params: dict[str, Any],
        expected_s: float,
        on_tick: Callable[[float], None] | None = None,
        analyze_result: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Run any probe subcommand as one stored run; returns its result with
        the analysis (also stored) under "analysis"."""
        started = sessions.now_iso()
        probe = run_probe(command, args, expected_s=expected_s, on_tick=on_tick)
        analysis = analyze_result(probe.result) if analyze_result else {}
        self._store(command, params, started, probe, {}, [], analysis)
        return {**probe.result, "analysis": analysis}

    def record(
        self,
        kind: str,
        params: dict[str, Any],
        started: str,
        envelope: dict[str, Any],
        analysis: dict[str, Any] | None = None,
    ) -> None:
        """Store a run quietcore measured itself (a user's command, an
        experiment's summary), with the same provenance as a probe's."""
        text = json.dumps(envelope)
        self._store(kind, params, started, ProbeResult(envelope, text, False), {}, [], analysis)

    def calibrate(self, trials: int = 5, trial_ms: int = 100) -> dict[str, Any]:
        args = ["--trials", str(trials), "--trial-ms", str(trial_ms)]
        return self.probe("calibrate", args, {"trials": trials, "trial_ms": trial_ms}, trials * trial_ms / 1000)

    def _store(
        self,
        kind: str,
        params: dict[str, Any],
        started: str,
        probe: ProbeResult,
        context: dict[str, Any],
        rows: list[dict[str, Any]],
        analysis: dict[str, Any] | None = None,
    ) -> None:
        status = "interrupted" if probe.interrupted else "complete"
        sessions.add_run(self.conn, self.id, kind, params, started, status, probe.text, context, rows, analysis)
        if probe.interrupted:
            # Stored first, then the interrupt goes on: no further runs.
            raise Interrupted(f"interrupted: what was measured is stored as session {self.id} in {self.db_path}")

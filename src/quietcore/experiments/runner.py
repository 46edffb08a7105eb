"""Running an experiment: levers checked before anything starts, warm-ups
first, then every (cell, repetition) in a seeded random order, each run set
up (levers through the journal, competing loads started), measured, stored
and torn down before the next. Ctrl-C and SIGTERM stop between or inside a
run; the journal and the finally clauses put the node back."""

from __future__ import annotations

import contextlib
import os
import random
import resource
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quietcore.errors import CommandError, Interrupted, UsageError
from quietcore.experiments.context import Watch, open_watch
from quietcore.experiments.custom_exec import MetricMissing, run_command
from quietcore.experiments.levers import in_order, lever
from quietcore.experiments.model import Cell, Experiment, Load
from quietcore.levers.journal import Journal, node_journal
from quietcore.probes.runner import child_env, probe_path
from quietcore.sched import DEADLINE, is_rt

if TYPE_CHECKING:  # the annotation alone: validating an experiment must not load the analysis
    from quietcore.session import Session


@dataclass
class Outcome:
    """What the runs of one cell gave."""

    cell: Cell
    results: list[dict[str, Any]] = field(default_factory=list)  # measured runs, not warm-ups
    contexts: list[dict[str, Any]] = field(default_factory=list)  # each measured run's intrusions and covariates
    failed: str | None = None  # why the cell stopped, if it did
    missing: int = 0  # measured runs left out: their output held no sample of the verdict's metric
    ran: int = 0  # runs started, warm-ups too


def check_levers(exp: Experiment, strict: bool, cpus: frozenset[int]) -> None:
    """Drop the cells this node cannot run, saying why (strict: a value the
    kernel does not offer is bad input instead, for user-written plans)."""
    kept = []
    for cell in exp.cells:
        why = None
        for name, value in cell.levers.items():
            knob = lever(name, cpus)
            ok, reason = knob.available()
            if not ok:
                why = f"{name}: {reason}"
                break
            invalid = knob.validate(value)
            if invalid:
                if strict:
                    raise UsageError(f"invalid {name} value {value!r} ({invalid})")
                why = f"{name}={value} is not offered ({invalid})"
                break
            if os.geteuid() != 0:
                why = f"{name}: changing it needs root"
                break
        if why is None and is_rt(cell.policy) and os.geteuid() != 0:
            limit = resource.getrlimit(resource.RLIMIT_RTPRIO)[0]
            if limit != resource.RLIM_INFINITY and limit < cell.priority:
                why = (f"policy {cell.policy} needs root, CAP_SYS_NICE or RLIMIT_RTPRIO >= {cell.priority} "
                       f"(it is {limit})")  # fmt: skip
        if why is None and cell.policy == DEADLINE and os.geteuid() != 0:
            why = "policy deadline needs root or CAP_SYS_NICE"
        if why:
            exp.skipped.append((cell.label, why))
        else:
            kept.append(cell)
    exp.cells = kept


def order(exp: Experiment, seed: int) -> list[tuple[Cell, int]]:
    """Warm-ups (negative repetition numbers) first, then the measured runs;
    each part shuffled with the seed, so drift over time spreads across the
    cells instead of landing on one."""
    rng = random.Random(seed)
    warm = [(cell, -1 - k) for cell in exp.cells for k in range(exp.warmup)]
    runs = [(cell, k) for cell in exp.cells for k in range(exp.reps)]
    rng.shuffle(warm)
    rng.shuffle(runs)
    return warm + runs


def _start(load: Load) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(probe_path()), load.command, *load.args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()


LOAD_READY_S = 1.0  # at most, for a load to be pinned: then the workload starts anyway


def _ready(procs: list[subprocess.Popen[bytes]], loads: Sequence[Load]) -> None:
    """Wait until every load has a thread pinned to its CPUs: it runs there (a
    competitor spins, a disturbance sleeps to its next period) before the
    workload starts. Polled, not a fixed wait: about 2 ms here, where a fixed
    50 ms cost 5 s of a 30 s `run sched --quick`."""
    deadline = time.monotonic() + LOAD_READY_S
    waiting = list(zip(procs, loads, strict=True))
    while waiting and time.monotonic() < deadline:
        waiting = [(p, load) for p, load in waiting if p.poll() is None and not _pinned(p.pid, load.cpus)]
        if waiting:
            time.sleep(0.001)


def _pinned(pid: int, cpus: frozenset[int]) -> bool:
    """The load has become the probe (exec'd) and one of its threads is pinned within cpus."""
    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() != "quietcore-probe":
            return False
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in threads:
        try:
            if os.sched_getaffinity(int(tid)) <= cpus:
                return True
        except OSError:  # the thread ended
            continue
    return False


def run_experiment(
    session: Session,
    exp: Experiment,
    seed: int,
    cpus: frozenset[int],
    on_run: Callable[[int, int, Cell], None] | None = None,
    intrusions: str = "auto",
) -> list[Outcome]:
    """`cpus`: where CPU-wide levers (the governor) apply, and where an
    unpinned workload may run. `intrusions`: trace each run's intruders
    (auto: when root can; on; off)."""
    watch, tracing = open_watch(intrusions)
    with node_journal() as journal_conn, tracing or contextlib.nullcontext():
        return _run_all(session, exp, seed, cpus, journal_conn, on_run, watch)


def _run_all(session: Session, exp: Experiment, seed: int, cpus: frozenset[int], journal_conn: sqlite3.Connection,
             on_run: Callable[[int, int, Cell], None] | None, watch: Watch) -> list[Outcome]:  # fmt: skip
    outcomes = {cell.label: Outcome(cell) for cell in exp.cells}
    plan = order(exp, seed)
    for index, (cell, rep) in enumerate(plan):
        outcome = outcomes[cell.label]
        if outcome.failed:
            continue
        if on_run:
            on_run(index, len(plan), cell)
        params = {"experiment": exp.name, **cell.params(), "rep": rep, "warmup": rep < 0, "order": index, "seed": seed}
        loads: list[subprocess.Popen[bytes]] = []
        try:
            with Journal(journal_conn, session.id) as journal:
                for name, value in in_order(cell.levers):
                    lever(name, cpus).apply(value, journal)
                loads = [_start(load) for load in cell.loads]
                if loads:
                    _ready(loads, cell.loads)
                where = cell.where(cpus)
                watch.begin(where, away=where != cpus)
                try:
                    if cell.command == "exec":
                        result, context = run_command(session, cell, params, watch.end)
                    else:
                        run = session.node.probe(cell.command, cell.probe_args(), params, cell.expected_s,
                                                 away=where)  # fmt: skip
                        context = watch.end(run.result)
                        run.analysis["context"] = context
                        result = session.add(run).result
                finally:
                    watch.settle()
        except UsageError:
            raise
        except (Interrupted, KeyboardInterrupt) as exc:
            stored = session.stored_runs()
            measured = sum(len(o.results) for o in outcomes.values())
            raise Interrupted(
                f"interrupted: {stored} runs ({measured} measured, the rest warm-ups) are stored as session "
                f"{session.id} in {session.db_path}; the levers it changed are put back"
            ) from exc
        except MetricMissing as exc:
            # A pattern that matched nothing in the cell's first run never will: the cell stops with its
            # error; a later run without a sample is left out, and counted.
            outcome.ran += 1
            if outcome.ran == 1:
                outcome.failed = str(exc)
            elif rep >= 0:
                outcome.missing += 1
            continue
        except CommandError as exc:
            outcome.failed = str(exc)
            continue
        finally:
            _stop(loads)
        outcome.ran += 1
        if rep >= 0:
            outcome.results.append(result)
            outcome.contexts.append(context)
    return list(outcomes.values())

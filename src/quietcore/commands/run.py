"""Run an experiment: cells of kernel levers x workloads, interleaved.

Every cell runs --reps times (after --warmup runs) in a seeded random
order; levers are set through the journal and put back after every run,
also on Ctrl-C and SIGTERM; every run is stored. The table compares each
cell with its group's baseline: ratio of medians with a 95 % bootstrap
interval, Mann-Whitney U, Holm across the table, and a verdict.

experiments:
  tickless   matmul on isolated vs housekeeping CPUs (pinned vs unpinned without isolation)
  sched      policies other, fifo, rr x compute, memory, io, mixed, with and without a competitor
  preempt    stable and disturbed matmul under each preemption model the kernel can switch to
  affinity   cpuburn in five thread layouts, and the time to a common amount of work
  thp        THP never, madvise, always x sequential, strided, random memscan
  smt        two threads on SMT siblings or separate cores, normalised to one alone
  prefetch   equal-work stride sweep against sequential and random references
  numa       bandwidth and latency for every CPU node x memory node, beside the SLIT
  custom     --cmd CMD [--factor NAME=V1,V2]... or --file EXPERIMENT.toml

examples:
  quietcore run sched --quick
  quietcore run thp --reps 10 --tag node=a
  quietcore run custom --cmd 'python3 bench.py' --factor policy=other,fifo --factor cpus=1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from pathlib import Path
from typing import Any

from quietcore.commands import common
from quietcore.errors import UsageError
from quietcore.experiments import custom
from quietcore.experiments.builtin import BUILTIN
from quietcore.experiments.metric import parse_metric, parse_metric_of
from quietcore.experiments.model import Experiment
from quietcore.experiments.node import Node, read_node
from quietcore.experiments.runner import check_levers, run_experiment
from quietcore.options import int_in_range, positive_float
from quietcore.report import text
from quietcore.report.experiment import experiment_table, metric_line
from quietcore.report.iterations import iterations_table
from quietcore.report.kinds.experiment import spread_lines
from quietcore.report.progress import progress_bar
from quietcore.safe import markup
from quietcore.sched import check_priority
from quietcore.store import sessions

NAME = "run"
NAMES = (*BUILTIN, "custom")


#: Cells whose iterations are tabled in the text (--metric); --json has every cell's.
TABLES = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("experiment", metavar="NAME", choices=NAMES, help=f"one of: {', '.join(NAMES)}")
    parser.add_argument("--reps", metavar="N", help="measured runs per cell (1-10000; default per experiment)")
    parser.add_argument("--warmup", metavar="N", help="unmeasured runs per cell first (0-1000, default 1)")
    parser.add_argument("--quick", action="store_true", help="small sizes and few runs: about a minute")
    parser.add_argument("--cells", metavar="PATTERNS",
                        help="only the cells whose label matches one of these comma-separated shell patterns "
                             "(and their baselines), e.g. 'compute *,io other'")  # fmt: skip
    parser.add_argument("--seed", metavar="S", help="seed of the run order (default: random, and stored)")
    parser.add_argument("--priority", metavar="N", default="50", help="fifo/rr priority for sched (1-99, default 50)")
    parser.add_argument("--cmd", metavar="CMD", help="custom: the command to measure (no shell)")
    parser.add_argument("--factor", action="append", metavar="NAME=V1,V2", help="custom with --cmd: a factor")
    parser.add_argument("--file", metavar="TOML", help="custom: an experiment file")
    parser.add_argument(
        "--timeout", metavar="S", help="custom: end a run of the command (its process group) after S s (1-86400)"
    )
    parser.add_argument("--metric", action="append", metavar="NAME:REGEX[:higher|lower] | jmh",
                        help="custom: the command's own figure of merit, each match of REGEX's first group on its "
                             "output a sample (several: the first is the verdict's); jmh: JMH's scores")  # fmt: skip
    parser.add_argument("--metric-of", metavar="HOW",
                        help="custom: a run's value from its samples: median (default), mean or last")  # fmt: skip
    parser.add_argument("--intrusions", choices=("auto", "on", "off"), default="auto",
                        help="trace each run's intruders on its CPUs (auto: when root can)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_wait(parser)
    common.add_db(parser)
    common.add_tags(parser)


def plan(args: argparse.Namespace) -> tuple[Experiment, int, Node]:
    """Everything checked before the database is opened or the node touched."""

    name = args.experiment
    reps = int_in_range(args.reps, "--reps", 1, 10000) if args.reps is not None else None
    warmup = int_in_range(args.warmup, "--warmup", 0, 1000) if args.warmup is not None else None
    seed = int_in_range(args.seed, "--seed", 0, 2**63 - 1) if args.seed is not None else None
    priority = check_priority(args.priority, "--priority")
    node = read_node(common.live_root())
    if name == "custom":
        if bool(args.cmd) == bool(args.file):
            raise UsageError("run custom needs exactly one of --cmd CMD or --file EXPERIMENT.toml")
        if args.file:
            if args.factor:
                raise UsageError("--factor goes with --cmd; put factors in the [factors] table of --file")
            exp, file_seed = custom.from_file(Path(args.file), node, reps, warmup)
            seed = seed if seed is not None else file_seed
        else:
            exp = custom.from_cmd(args.cmd, args.factor or [], node, reps or 10, 1 if warmup is None else warmup)
        if args.timeout is not None:
            limit = positive_float(args.timeout, "--timeout", 1, 86400)
            exp.cells = [dataclasses.replace(c, timeout_s=limit) if c.command == "exec" else c for c in exp.cells]
        if args.metric or args.metric_of:
            found = tuple(parse_metric(m) for m in args.metric or ())
            of = parse_metric_of(args.metric_of) if args.metric_of else None
            exp.cells = [dataclasses.replace(c, metrics=found or c.metrics, metric_of=of or c.metric_of)
                         if c.command == "exec" else c for c in exp.cells]  # fmt: skip
            if not any(c.metrics for c in exp.cells):
                raise UsageError("--metric-of goes with --metric (or metric = [...] in --file)")
    else:
        for option in ("cmd", "file", "factor", "timeout", "metric", "metric_of"):
            if getattr(args, option):
                raise UsageError(f"--{option.replace('_', '-')} is only for `run custom`")
        exp = BUILTIN[name](node, args.quick, priority)
        exp.reps = reps if reps is not None else exp.reps
        exp.warmup = warmup if warmup is not None else exp.warmup
    if args.cells is not None:
        _select(exp, args.cells)
    check_levers(exp, strict=name == "custom", cpus=node.allowed)
    if not exp.cells:
        reasons = "; ".join(f"{label}: {why}" for label, why in exp.skipped) or "no cells"
        raise UsageError(f"nothing of {name} can run here: {reasons}")
    return exp, seed if seed is not None else random.SystemRandom().randrange(2**31), node


def _select(exp: Experiment, text: str) -> None:
    patterns = [p.strip() for p in text.split(",") if p.strip()]
    labels = ", ".join(c.label for c in exp.cells)
    unmatched = exp.select(patterns) if patterns else [text]
    if unmatched:
        raise UsageError(f"--cells: {unmatched[0]!r} matches no cell of {exp.name} (valid: {labels})")


def run(args: argparse.Namespace) -> int:
    exp, seed, node = plan(args)  # bad input ends here, before the analysis is loaded
    from quietcore.experiments.analysis import analyse
    from quietcore.session import Session

    path, chosen = common.db_path(args)
    total = len(exp.cells) * (exp.reps + exp.warmup)
    levers = {name for cell in exp.cells for name in cell.levers}
    with (
        common.node_lock(args, node.allowed, levers),
        Session(f"run {exp.name}", path, chosen, common.tags(args), common.live_root()) as session,
    ):
        started = sessions.now_iso()
        with progress_bar(total, enabled=not args.json) as update:
            outcomes = run_experiment(
                session,
                exp,
                seed,
                node.allowed,
                lambda i, n, cell: update(f"{exp.name}: {cell.label}", i),
                args.intrusions,
            )
        analysis = analyse(exp, outcomes, session.virtualized)
        analysis["seed"] = seed
        envelope: dict[str, Any] = {
            "format": "quietcore-experiment",
            "command": "experiment",
            "start": started,
            "end": sessions.now_iso(),
            "result": {"name": exp.name, "seed": seed, "reps": exp.reps, "warmup": exp.warmup,
                       "cells": [c.params() | {"command": c.command, "args": c.probe_args()} for c in exp.cells]},
        }  # fmt: skip
        session.record("experiment", {"experiment": exp.name, "seed": seed}, started, envelope, analysis)
    if args.json:
        print(json.dumps({"session": session.id, **analysis}, indent=2))
        return 0
    out = text.console()
    out.print(experiment_table(analysis))
    line = metric_line(analysis)
    for sentence in ([line] if line else []) + analysis["notes"]:
        out.print(sentence)
    for sentence in spread_lines(analysis):
        out.print(sentence)
    shown = [s for s in analysis.get("spread", []) if s.get("slowest") and s.get("over") == "iterations"]
    for s in shown[:TABLES]:  # a figure of its own (--metric): each cell's slowest and fastest iterations
        out.print(iterations_table(s, f"{s['cell']}: its slowest and fastest iterations"))
    if len(shown) > TABLES:
        out.print(f"{len(shown) - TABLES} more cells' iterations are in --json.")
    for warning in analysis["warnings"]:
        out.print(f"[yellow]warning:[/yellow] {markup(warning)}", markup=True)
    out.print(f"Seed {seed}. Saved as session {session.id} in {session.db_path}.")
    out.print(f"Next: `quietcore compare {session.id} OTHER_SESSION`.")
    return 0

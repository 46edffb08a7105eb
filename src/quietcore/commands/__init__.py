"""One module per subcommand; each has NAME, add_arguments(parser) and
run(args) -> int, and its docstring is its --help.

`COMMANDS` names them with their one-line summaries, so that `quietcore
--help` lists every command without importing one, and a command's run
imports its own module alone (a test holds each summary to its module's
docstring)."""

from __future__ import annotations

import importlib
from types import ModuleType

COMMANDS: dict[str, str] = {
    "lab": "Survey this node: fingerprint it, measure noise on every online CPU, store and show it.",
    "audit": "Audit the node's whole noise surface and say how to fix each finding.",
    "noise": "Measure OS noise per CPU and say where the lost time went.",
    "latency": "Measure wake-up latency per CPU, as cyclictest does.",
    "ctxswitch": "Measure what a context switch costs, cross-CPU wake-up latency and time slices.",
    "intruders": "Name everything that ran on some CPUs besides your workload, and who sent it.",
    "run": "Run an experiment: cells of kernel levers x workloads, interleaved.",
    "compare": "Compare two sessions: what changed in the node, then every common cell.",
    "report": "Write a report of stored sessions: HTML with figures, and Markdown.",
    "results": "List, show, export and import stored results.",
    "snapshot": "Copy every file quietcore reads into a directory or a .tar.gz, for --root.",
    "tune": "Shield CPUs from OS noise: plan from the topology, apply, verify, revert.",
    "survey": "Measure every node of an MPI job at once: start under mpirun or srun.",
    "simulate": "What this node's noise would cost a bulk-synchronous job on many nodes.",
    "check": "Check this node's noise against its reference: PASS or FAIL, for a health check.",
    "reference": "Keep the reference noise `quietcore check` compares with, per configuration.",
    "watch": "What the OS took from every job on this node, charged to each job by source.",
}


def load(name: str) -> ModuleType:
    """The command's module. `name` is a key of COMMANDS, never text from outside."""
    if name not in COMMANDS:
        raise KeyError(name)
    return importlib.import_module(f"quietcore.commands.{name}")

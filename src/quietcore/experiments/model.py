"""What an experiment is: cells (one combination of factor values and a
workload), grouped so that each cell is compared with its group's baseline."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from quietcore.experiments.metric import Metric
from quietcore.facts.cpulist import parse_cpulist


@dataclass(frozen=True)
class Load:
    """A process run beside the workload: a competitor or a disturbance."""

    label: str
    command: str  # a quietcore-probe subcommand
    args: tuple[str, ...]

    @property
    def cpus(self) -> frozenset[int]:
        """The CPUs it is pinned to (its --cpus)."""
        at = self.args.index("--cpus")
        return parse_cpulist(self.args[at + 1])


@dataclass(frozen=True)
class Cell:
    label: str
    group: str  # cells are compared with the baseline of their group
    factors: dict[str, str]
    command: str  # a quietcore-probe workload, or "exec" for a user command
    args: tuple[str, ...]
    expected_s: float
    levers: dict[str, str] = field(default_factory=dict)  # lever name -> value
    loads: tuple[Load, ...] = ()
    baseline: bool = False
    argv: tuple[str, ...] = ()  # for "exec": the user's command
    cpus: frozenset[int] = frozenset()  # for "exec": where to pin it (empty: anywhere)
    # The workload's scheduling policy: the one place it is set, for probes
    # (as options, see probe_args) and user commands (before exec) alike.
    policy: str = "other"
    priority: int = 0
    timeout_s: float = 0.0  # for "exec": --timeout, 0 for none
    metrics: tuple[Metric, ...] = ()  # for "exec": its own figures of merit (--metric), the first the verdict's
    metric_of: str = "median"  # a run's value from its samples (--metric-of)

    def where(self, anywhere: frozenset[int]) -> frozenset[int]:
        """The CPUs its workload runs on: its pinning, else `anywhere`."""
        if self.cpus:
            return self.cpus
        if "--cpus" in self.args:
            try:
                return parse_cpulist(self.args[self.args.index("--cpus") + 1])
            except (IndexError, ValueError):
                return anywhere
        return anywhere

    def probe_args(self) -> list[str]:
        extra = [] if self.policy == "other" else ["--policy", self.policy]
        if self.priority:
            extra += ["--priority", str(self.priority)]
        return [*self.args, *extra]

    def params(self) -> dict[str, Any]:
        return {
            "cell": self.label,
            "group": self.group,
            "factors": self.factors,
            "levers": self.levers,
            "loads": [load.label for load in self.loads],
            "baseline": self.baseline,
        }


@dataclass
class Experiment:
    name: str
    title: str
    cells: list[Cell]
    reps: int
    warmup: int
    notes: list[str] = field(default_factory=list)  # plain facts about this node's limits
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (cell, why)
    data: dict[str, Any] = field(default_factory=dict)  # facts a figure needs (the SLIT for numa)

    def select(self, patterns: list[str]) -> list[str]:
        """Keep the cells whose label matches one of the shell patterns, and
        the baseline of each group kept (every cell is compared with it).
        Returns the patterns that matched no cell."""
        chosen = [c for c in self.cells if any(fnmatch.fnmatchcase(c.label, p) for p in patterns)]
        unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(c.label, p) for c in self.cells)]
        groups = {c.group for c in chosen}
        self.cells = [c for c in self.cells if c in chosen or (c.baseline and c.group in groups)]
        return unmatched

    def groups(self) -> dict[str, list[Cell]]:
        out: dict[str, list[Cell]] = {}
        for cell in self.cells:
            out.setdefault(cell.group, []).append(cell)
        return out

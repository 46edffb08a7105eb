"""From the runs of each cell to the table: descriptive statistics with a
bootstrap interval of the median, each cell against its group's baseline
(ratio of medians with its interval, Mann-Whitney U, Holm across the whole
table), plain verdicts, the experiment's own figures, and warnings a user
can act on."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from quietcore.experiments.iterations import explain_iterations, explain_runs
from quietcore.experiments.model import Experiment
from quietcore.experiments.runner import Outcome
from quietcore.experiments.spread import explain
from quietcore.stats.bootstrap import bootstrap_ci
from quietcore.stats.compare import compare, compare_many, cv_warning, describe
from quietcore.stats.percentiles import min_samples


def _median(values: list[float]) -> float:
    return float(np.median(values))


def _unit(row: dict[str, Any]) -> str | None:
    """A figure of merit's own unit for its verdict ("31 % more ops/s"); None for time and the probes'."""
    m = row.get("metric") or {}
    return str(m["unit"]) if m.get("name") != "wall_s" and "wall" in row and m.get("unit") else None


def _extras(exp: Experiment, outcome: Outcome, base: Outcome | None) -> dict[str, str]:
    """Figures particular to a workload, from its runs' own results."""
    results, out = outcome.results, dict[str, str]()
    if not results:
        return out
    work = results[0].get("workload")
    if work == "memscan":
        fractions = [r["huge_fraction"] for r in results if r.get("huge_fraction", -1) >= 0]
        if fractions:
            out["huge pages"] = f"{_median(fractions):.0%}"
    if work == "numa":
        out["latency ns"] = f"{_median([r['latency_ns'] for r in results]):.1f}"
    if work == "cpuburn" and base and base.results:
        mine = _median([r["metric"]["value"] for r in results])
        theirs = _median([r["metric"]["value"] for r in base.results])
        out["per-thread speed"] = f"{theirs / mine:.2f}x"
        if exp.name == "affinity":
            # The seed's T_X: the time each thread needs for a common amount
            # of work, X = what one thread of the baseline did per run.
            x = _median([r["iters_total"] / r["threads"] for r in base.results])
            out["time to common work"] = f"{x * mine / 1e9:.3f} s"
    return out


def analyse(exp: Experiment, outcomes: list[Outcome], virtualized: bool) -> dict[str, Any]:
    by_label = {o.cell.label: o for o in outcomes}
    groups = exp.groups()
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    spread: list[dict[str, Any]] = []
    pending: list[tuple[dict[str, Any], list[float], list[float], bool]] = []
    for group, cells in groups.items():
        base_cell = next((c for c in cells if c.baseline), None)
        base = by_label.get(base_cell.label) if base_cell else None
        for cell in cells:
            o = by_label[cell.label]
            values = [float(r["metric"]["value"]) for r in o.results]
            row: dict[str, Any] = {"cell": cell.label, "group": group, "factors": cell.factors,
                                   "baseline": cell.baseline, "values": values, "failed": o.failed}  # fmt: skip
            if o.failed:
                warnings.append(f"{cell.label}: could not run: {o.failed}")
            if o.missing:
                row["missing"] = o.missing
                runs = "1 run was" if o.missing == 1 else f"{o.missing} runs were"
                warnings.append(f"{cell.label}: {runs} left out. Their output held no sample of --metric "
                                f"{cell.metrics[0].spec()}.")  # fmt: skip
            if not values:
                rows.append(row)
                continue
            metric = o.results[0]["metric"]
            row["metric"] = {k: metric[k] for k in ("name", "unit", "better")}
            d = describe(values)
            row["stats"] = asdict(d)
            if len(values) >= 2:
                row["median_ci"] = list(bootstrap_ci(values))
            cv = cv_warning(cell.label, d)
            warnings += [cv] if cv else []
            row["extra"] = _extras(exp, o, base)
            traced = [c["intrusions"]["ns"] for c in o.contexts if "ns" in c["intrusions"]]
            if traced and len(traced) == len(values):
                row["extra"]["intruders"] = f"{_median(traced) / 1e6:.2f} ms"
            lost = [c["intrusions"].get("lost_events", 0) for c in o.contexts]
            if any(lost):
                warnings.append(f"{cell.label}: the trace lost {sum(lost):,} events in {sum(map(bool, lost))} runs. "
                                "Their intrusions are short by what those held.")  # fmt: skip
            if "wall" in o.results[0]:  # a figure of its own: wall time is the second, and spread is per iteration
                walls = [float(r["wall"]["value"]) for r in o.results]
                row["wall"] = {"median_s": _median(walls), "stats": asdict(describe(walls))}
                row["extra"]["wall"] = f"{_median(walls):.3f} s"
                if base and not cell.baseline and len(walls) >= 2 and len(base.results) >= 2:
                    # beside the verdict on the score, what wall time alone would have said (unadjusted)
                    c = compare([float(r["wall"]["value"]) for r in base.results], walls)
                    row["wall"]["comparison"] = asdict(c)
                    row["extra"]["wall vs baseline"] = f"{c.ratio:.3f} (p {c.p_value:.2g})"
                by_run = explain_runs(cell.label, o.results, metric)
                if by_run and by_run.get("slow_where"):
                    spread.append(by_run)
                explained = explain_iterations(cell.label, o.results, metric)
            else:
                explained = explain(cell.label, values, o.contexts, metric["unit"], virtualized)
            if explained:
                spread.append(explained)
            for r in o.results:
                w = r.get("warning")
                if w and f"{cell.label}: {w}" not in warnings:
                    warnings.append(f"{cell.label}: {w}")
            if base and not cell.baseline and len(values) >= 2 and len(base.results) >= 2:
                base_values = [float(r["metric"]["value"]) for r in base.results]
                pending.append((row, base_values, values, metric["better"] == "higher"))
            rows.append(row)
    done = compare_many([(base_values, values, higher) for _, base_values, values, higher in pending],
                        [_unit(row) for row, *_ in pending])  # fmt: skip
    for (row, *_), c in zip(pending, done, strict=True):
        row["comparison"] = asdict(c)
    sizes = sorted({len(r["values"]) for r in rows if r["values"]})
    if sizes and sizes[0] < min_samples(0.95):
        warnings.append(f"p95 and p99 are not shown: a cell has {sizes[0]} runs, and a p95 needs "
                        f"{min_samples(0.95)}. --reps {min_samples(0.95)} gives them.")  # fmt: skip
    for label, why in exp.skipped:
        warnings.append(f"{label}: not run: {why}")
    if virtualized:
        warnings.append("this node is a virtual machine. The host's own scheduling adds noise no guest setting "
                        "removes, and some levers, isolation and the governor, act only on the guest.")  # fmt: skip
    return {"experiment": exp.name, "title": exp.title, "reps": exp.reps, "warmup": exp.warmup, "rows": rows,
            "notes": exp.notes, "warnings": warnings, "data": exp.data, "spread": spread}  # fmt: skip

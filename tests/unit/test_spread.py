"""A cell's run-to-run spread: how much the intrusions on its CPUs account
for (direct accounting with a bootstrap interval), the source named, the
covariates that move with the run time, and what was not measured."""

from __future__ import annotations

from typing import Any

import numpy as np

from quietcore.experiments.spread import explain
from quietcore.report.spread import runs


def said(out: dict[str, Any]) -> str:
    """The cell's sentences as `run` prints them (report.spread)."""
    return " ".join(runs(out))


def context(intruder_ns: float, source: str = "stress-ng", **covariates: float) -> dict[str, Any]:
    sources = [{"kind": "task", "name": source, "pid": 4242, "ns": intruder_ns, "count": 3}] if intruder_ns else []
    return {"cpus": [1], "intrusions": {"ns": intruder_ns + 2e4, "sources": sources}, "covariates": covariates}


def test_a_task_that_took_the_slow_runs_time_accounts_for_their_excess() -> None:
    # Ten runs of 100 ms; three of them had 40 ms of stress-ng on their CPU, and lost that much.
    rng = np.random.default_rng(1)
    hit = [False, True, False, False, True, False, False, True, False, False]
    times = [0.100 + (0.040 if h else 0.0) + rng.normal(0, 0.0003) for h in hit]
    contexts = [context(40e6 if h else 0.0, ctxsw_involuntary=30 if h else 2) for h in hit]
    out = explain("compute other", times, contexts, "s", virtualized=True)
    assert out is not None and out["explained"] and out["slow_runs"] == 5
    assert {2, 5, 8} <= set(out["slow"]) and "were the slowest" in said(out)  # the three hit, numbered from 1
    lo, hi = out["interval"]
    assert lo <= out["share"] <= hi
    # The runs above the median are the three hit and two of the others: the 40 ms of three is ~their excess.
    assert 0.85 < out["share"] < 1.15, out
    assert out["source"]["name"] == "stress-ng (pid 4242)" and out["source"]["other_ms"] == 0.0
    assert "Intrusions account for" in said(out) and "stress-ng (pid 4242)" in said(out)
    assert any(c["what"] == "involuntary context switches" for c in out["covariates"])
    assert "Involuntary context switches and the run time rise together: Spearman rho" in said(out)


def test_spread_nothing_traced_explains_says_so_and_names_what_was_not_measured() -> None:
    rng = np.random.default_rng(2)
    times = list(0.100 + rng.normal(0, 0.002, 12))
    contexts = [context(1e5) for _ in times]  # the same small intrusion in every run
    out = explain("memory other", times, contexts, "s", virtualized=True)
    assert out is not None and not out["explained"]
    assert "Nothing traced accounts for it" in said(out)
    assert "the host's preemptions of this vCPU" in out["not_measured"] and "the CPU frequency" in out["not_measured"]


def test_without_a_trace_it_says_why_and_still_ranks_the_covariates() -> None:
    times = [0.10, 0.11, 0.12, 0.13, 0.14, 0.15]
    contexts = [{"cpus": [1], "intrusions": {"why_not": "tracefs needs root"},
                 "covariates": {"minor_faults": 100 * i}} for i in range(6)]  # fmt: skip
    out = explain("io other", times, contexts, "s", virtualized=False)
    assert out is not None and said(out).startswith("io other: intrusions are not accounted, since tracefs needs root")
    assert out["covariates"] and out["covariates"][0]["what"] == "minor page faults"


def test_too_few_runs_or_no_spread_is_nothing_to_explain() -> None:
    assert explain("x", [0.1, 0.2], [context(0), context(0)], "s", False) is None
    assert explain("x", [0.1] * 5, [context(0)] * 5, "s", False) is None


def test_a_workloads_own_io_time_that_moves_with_the_run_is_named_and_a_perfect_order_is_no_p_of_0() -> None:
    # The shape of `run sched --quick`'s mixed cell here: checkpoints of about 1.3 ms, and the device stalling
    # one of them in two runs of seven (the probe's io_ns of each run).
    times = [0.108, 0.140, 0.181, 0.121, 0.156, 0.129, 0.171]
    io = [8.1e6, 30.2e6, 72.0e6, 14.5e6, 47.3e6, 21.0e6, 61.8e6]
    contexts = [{"cpus": [1], "intrusions": {"why_not": "--intrusions off"},
                 "covariates": {"io_ns": v, "minor_faults": 256}} for v in io]  # fmt: skip
    out = explain("mixed other", times, contexts, "s", virtualized=True)
    assert out is not None
    (named,) = out["covariates"]
    assert named["what"] == "the workload's own I/O times"
    assert "and the run time rise together: Spearman rho 1.00, p < 0.001 after Holm" in said(
        out
    ) and "p 0 " not in said(out)

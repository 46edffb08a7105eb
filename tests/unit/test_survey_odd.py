"""Rank 0's step over the node summaries: the odd-node rule and the
configuration diff, on synthetic jobs of up to 10,000 nodes."""

from __future__ import annotations

import random

from quietcore.survey.odd import NodeSummary, config_diff, odd_count, odd_nodes

CONFIG = {"kernel": "6.8.0", "thp": "madvise", "irqbalance": "stopped", "virtualization": "none"}


def job(n: int, seed: int = 1) -> list[NodeSummary]:
    """n quiet nodes: 0.3-0.5 % lost, a tick at 250 Hz taking 0.2-0.3 %."""
    rng = random.Random(seed)
    return [NodeSummary(f"node{i}", {"noise fraction": rng.uniform(0.3, 0.5), "max gap": rng.uniform(20, 60),
                                     "p99.9 gap": rng.uniform(10, 30), "events": rng.uniform(900, 1100)},
                        {"250 Hz": rng.uniform(0.2, 0.3)}, dict(CONFIG)) for i in range(n)]  # fmt: skip


def test_one_planted_bad_node_among_10000_is_the_only_odd_one() -> None:
    nodes = job(10_000)
    bad = nodes[4321]
    bad.figures["noise fraction"] = 2.5
    bad.sources["100 Hz"] = 2.0
    bad.config["thp"] = "always"
    verdicts = odd_nodes(nodes)
    odd = [v for v in verdicts if v.odd]
    assert [v.name for v in odd] == ["node4321"]
    assert any(r.startswith("noise fraction 2.50 %") for r in odd[0].reasons)
    assert any(r.startswith("periodic source 100 Hz: 2.00 %") for r in odd[0].reasons)
    assert config_diff(nodes) == {"node4321": ["thp always (others madvise)"]}


def test_a_uniformly_noisy_job_has_no_odd_node() -> None:
    """Noise all share is not a node's fault: 100 nodes losing 2-6 % each."""
    rng = random.Random(3)
    nodes = job(100)
    for n in nodes:
        n.figures["noise fraction"] = rng.uniform(2.0, 6.0)
    assert not any(v.odd for v in odd_nodes(nodes))


def test_gap_metrics_can_be_left_out_of_the_verdict() -> None:
    """On virtual machines a single host stall makes any node's max gap
    large: with gaps=False it is not a reason."""
    nodes = job(10)
    nodes[2].figures["max gap"] = 9000.0
    assert [v.name for v in odd_nodes(nodes) if v.odd] == ["node2"]
    assert not any(v.odd for v in odd_nodes(nodes, gaps=False))


def test_two_nodes_a_quiet_and_a_disturbed_one() -> None:
    """With two nodes there is no majority: neither is odd, and the one that
    loses twice the other's time, by more than the floor, is said to differ,
    with the figures; the quiet one does not."""
    quiet, loud = job(2)
    loud.figures["noise fraction"] = 3.4
    verdicts = {v.name: v for v in odd_nodes([quiet, loud])}
    assert not verdicts[loud.name].odd and not verdicts[quiet.name].odd
    assert verdicts[loud.name].differs and not verdicts[quiet.name].differs
    assert verdicts[loud.name].reasons[0].startswith("noise fraction 3.40 % (others' median 0.")
    nodes = [{"rank": 0, "odd": False, "differs": False}, {"rank": 1, "odd": False, "differs": True}]
    assert odd_count({"ranks": 2, "nodes": nodes}) == (
        "2 ranks: too few to call one odd (3 needed); rank 1 stands above the other"
    )


def test_three_nodes_are_enough_to_call_one_odd() -> None:
    nodes = job(3)
    nodes[2].figures["noise fraction"] = 3.4
    verdicts = odd_nodes(nodes)
    assert [v.name for v in verdicts if v.odd] == ["node2"] and not any(v.differs for v in verdicts)


def test_config_ties_name_every_value() -> None:
    a, b = job(2)
    b.config["irqbalance"] = "running"
    assert config_diff([a, b]) == {"node0": ["irqbalance stopped (others running)"],
                                   "node1": ["irqbalance running (others stopped)"]}  # fmt: skip


def test_each_nodes_others_median_matches_the_slow_way() -> None:
    """The one-sort shortcut against the median of the list without each
    value, on lists of every length up to 40, with ties."""
    import statistics

    from quietcore.survey.odd import _others_medians

    rng = random.Random(5)
    for n in range(1, 41):
        values = [float(rng.randint(0, 9)) for _ in range(n)]
        slow = [statistics.median(values[:i] + values[i + 1 :]) if n > 1 else values[0] for i in range(n)]
        assert _others_medians(values) == slow, values


def test_audit_findings_that_differ_are_listed_once_with_their_nodes() -> None:
    from quietcore.survey.odd import audit_diff

    audits = {f"node{i}": {"mem.thp": ("pass", "THP madvise"), "irq.irqbalance": ("pass", "stopped"),
                           "cpu.governor": ("fail", "powersave")} for i in range(4)}  # fmt: skip
    audits["node2"]["mem.thp"] = ("fail", "THP always")
    del audits["node3"]["irq.irqbalance"]
    differ = {f["id"]: f for f in audit_diff(audits)}
    assert set(differ) == {"mem.thp", "irq.irqbalance"}, "a finding failing everywhere is the job's, not a node's"
    assert differ["mem.thp"]["statuses"] == {"fail": ["node2"], "pass": ["node0", "node1", "node3"]}
    assert differ["mem.thp"]["summaries"]["fail"] == "THP always"
    assert differ["irq.irqbalance"]["statuses"]["absent"] == ["node3"]


def test_a_node_without_a_p999_is_not_judged_on_it() -> None:
    """A node with fewer than 1,000 gaps has no p99.9 (stats.percentiles):
    the others are not compared against a made-up zero."""
    nodes = job(5)
    del nodes[0].figures["p99.9 gap"]
    assert not any(v.odd for v in odd_nodes(nodes))
    nodes[3].figures["p99.9 gap"] = 9000.0
    assert [v.name for v in odd_nodes(nodes) if v.odd] == ["node3"]

"""Rank 0's step of a survey at scale: the odd-node rule and the
configuration diff over 1,000 and 10,000 synthetic node summaries (one
planted bad node), timed, with the cost per node (it should stay flat:
one sort per metric). Peer in the same run: sorting the same values with
Python's sorted(), the floor of any median-based rule.

    python bench/survey.py"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from quietcore.survey.odd import METRICS, NodeSummary, config_diff, odd_nodes

TARGET_S = 1.0  # 10,000 nodes


def job(n: int) -> list[NodeSummary]:
    rng = random.Random(n)
    nodes = [NodeSummary(f"node{i}", {"noise fraction": rng.uniform(0.3, 0.5), "max gap": rng.uniform(20, 60),
                                      "p99.9 gap": rng.uniform(10, 30), "events": rng.uniform(900, 1100)},
                         {"250 Hz": rng.uniform(0.2, 0.3)}, {"thp": "madvise"}) for i in range(n)]  # fmt: skip
    nodes[n // 2].figures["noise fraction"] = 3.0
    nodes[n // 2].config["thp"] = "always"
    return nodes


def main() -> int:
    print(f"{'nodes':>8} {'odd + diff':>12} {'per node':>10} {'peer: sorts':>12} {'ratio':>6}  found")
    last = 0.0
    for n in (1_000, 10_000):
        nodes = job(n)
        t = time.perf_counter()
        odd = [v.name for v in odd_nodes(nodes) if v.odd]
        diff = config_diff(nodes)
        took = time.perf_counter() - t
        t = time.perf_counter()
        for metric in (*METRICS, "250 Hz"):
            sorted(n_.figures.get(metric, 0.0) for n_ in nodes)
        peer = time.perf_counter() - t
        print(f"{n:>8,} {took:>10.3f} s {took / n * 1e6:>7.1f} µs {peer:>10.3f} s {took / peer:>6.1f}  {odd} {diff}")
        last = took
    ok = last <= TARGET_S
    print(f"10,000 nodes: {last:.3f} s (target <= {TARGET_S:g} s) {'PASS' if ok else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

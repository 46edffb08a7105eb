"""Groups of CPUs that stand apart by where they sit (report.summary.apart): on a made-up
2 x 96 x 2 node (two EPYCs, an L3 group every 8 cores), a noisier L3 group or socket is one
line, coarsest first, and a node whose CPUs differ only by chance has none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quietcore.facts.root import Root
from quietcore.facts.topology import places, read_topology
from quietcore.report.summary import apart
from tests.fixtures.make_roots import topology_root


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    topology = read_topology(Root(str(topology_root(tmp_path_factory.mktemp("epyc")))))
    assert len(topology.online) == 384 and topology.siblings[5] == frozenset({5, 197})
    return places(topology, topology.online)


def rows(shares: np.ndarray) -> list[dict[str, Any]]:
    return [{"cpu": c, "measured_ns": 1e9, "lost_ns": 1e9 * s} for c, s in enumerate(shares.tolist())]


def lost(seed: int) -> np.ndarray:
    """Each CPU's lost share, spread as this VM's CPUs spread (1.6 % median, a third either way)."""
    return np.random.default_rng(seed).lognormal(np.log(0.016), 0.3, 384)


def test_a_noisier_l3_group_is_named_with_its_cpus(where: dict[str, dict[str, int]]) -> None:
    shares = lost(1)
    group = [c for c, g in where["l3"].items() if g == 24]
    shares[[int(c) for c in group]] *= 2
    (line,) = apart(rows(shares), where)
    assert line.startswith("CPUs 24-31,216-223 (L3 group 24): a noisier L3 group. They lose ")


def test_a_noisier_socket_is_one_line_not_its_l3_groups_too(where: dict[str, dict[str, int]]) -> None:
    shares = lost(2)
    shares[[int(c) for c, p in where["package"].items() if p == 0]] *= 1.8
    (line,) = apart(rows(shares), where)
    assert line.startswith("CPUs 0-95,192-287 (socket 0): a noisier socket. They lose ")


@pytest.mark.parametrize("seed", range(5))
def test_chance_alone_sets_no_group_apart(where: dict[str, dict[str, int]], seed: int) -> None:
    assert apart(rows(lost(seed)), where) == []


def test_a_noisy_l3_group_is_not_said_as_its_socket(tmp_path: Path) -> None:
    """Half a socket noisy (an L3 group of 8 cores of a 2 x 16 x 2 node) pulls the socket's
    median up too: the group is said, against the rest of its socket, and the socket is not."""
    topology = read_topology(Root(str(topology_root(tmp_path, sockets=2, cores=16, threads=2))))
    where = places(topology, topology.online)
    shares = np.random.default_rng(3).lognormal(np.log(0.016), 0.3, 64)
    group = sorted(int(c) for c, g in where["l3"].items() if g == 8)
    shares[group] *= 2
    (line,) = apart(rows(shares), where)
    assert line.startswith("CPUs 8-15,40-47 (L3 group 8): a noisier L3 group.") and "the CPUs beside them" in line

"""Every source named once and truly, on real traces (issue 35): the GPU node's
CPUs 4 and 12 (tests/fixtures/README.md), analysed again with today's code."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from quietcore.runs.analysis import source_kind
from tests.conftest import CliRunner

SESSION5 = Path(__file__).resolve().parents[1] / "fixtures" / "noise" / "gpu-node-h200-session5-cpus4-12.json.gz"


def test_the_gpu_nodes_sources_each_have_a_name_and_a_basis_and_no_cpu_has_one_twice(
    cli: CliRunner, tmp_path: Path
) -> None:
    exported = tmp_path / "session5.json"
    exported.write_bytes(gzip.decompress(SESSION5.read_bytes()))
    assert cli("results", "import", str(exported)).returncode == 0
    again = cli("results", "analyse", "1")
    assert again.returncode == 0, again.stderr
    run = json.loads(cli("results", "export", "2", "--format", "json").stdout)["runs"][0]
    for cpu in run["analysis"]["cpus"]:
        periodic = cpu["periodic"]
        heavy = [p for p in periodic if (p["share_of_lost"] or 0) >= 0.01]
        assert heavy and all(p["name"] for p in heavy), periodic
        kinds = [source_kind(p["name"]) for p in periodic if p["name"]]
        assert len(kinds) == len(set(kinds)), kinds
        names = " | ".join(p["name"] for p in heavy)
        # the tick once, the second train at its rate said not to be it, the host's 1 kHz timer
        assert names.count("the scheduler tick, CONFIG_HZ=250") == 1, names
        assert "at the tick's rate, not the tick (counted: LOC " in names, names
        assert "faster than any interrupt this CPU counted" in names, names

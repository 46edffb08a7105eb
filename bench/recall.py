"""How often the periodicity search finds a weak train on a few of many CPUs,
and whether the screen says it: issue 62's detection curve.

Real traces (this VM's two CPUs over 10 s and the GPU node's CPUs 4 and 12
over 10 s, both in tests/fixtures/noise, or the traces of a directory given)
are replayed on N CPUs as bench/manycpu.py replays them. A train of --hz,
each gap long enough to take a set share of a CPU, is planted on k CPUs
drawn at random, with a random phase and 10 us of jitter; a planted gap that
meets a recorded one is merged with it, as the probe would see them. Each
replay is analysed as `results import --from trace` analyses it, in one
process, and the screen `results show` prints is built from it.

    python bench/recall.py [--cpus 16,64,384] [--k 1,2,8] [--strength 0.05,0.1,0.2,0.5,1]
                           [--replays 5] [--hz 37] [--traces DIR] [--jobs 2]

Printed per template, N, k and strength: the share of the planted CPUs on
which the train was found (a periodic source at its rate, within 2 %, and
of its length, within SAME_SOURCE), on how many replays the screen named it
on each CPU that found it, and the analysis's CPU time per CPU-second of
trace (the median replay). Target (issue 62): at 384 CPUs a train of 0.1 %
of a CPU or more is found on 95 % or more of the CPUs that have it, with
the analysis within 1 ms of a core a CPU-second."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from tests.replay import merged, replayed, with_train  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "noise"
#: Recall asked at 0.1 % of a CPU and more (issue 62), and the analysis's budget: 1 ms of a core a CPU-second at
#: 1,500 events a CPU-second, as many more as a replay's events are above it (bench/manycpu.py's).
RECALL, FROM_STRENGTH, BUDGET_MS, BUDGET_RATE = 0.95, 0.1, 1.0, 1500.0
SPAN_S = 10.0
JITTER_NS = 10e3


def templates(given: Path | None) -> list[tuple[str, list[np.ndarray]]]:
    """(name, each CPU's (start, length) pairs, ns from 0) of the traces replayed."""
    if given is not None:
        return [(str(given), [np.loadtxt(f, delimiter="\t", ndmin=2) for f in sorted(given.glob("*.trace"))])]
    vm = [np.loadtxt(io.BytesIO(gzip.decompress(f.read_bytes())), delimiter="\t", ndmin=2)
          for f in sorted(FIXTURES.glob("vm-10s-cpu*.gz"))]  # fmt: skip
    run = json.loads(gzip.decompress((FIXTURES / "gpu-node-h200-session5-cpus4-12.json.gz").read_bytes()))["runs"][0]
    gpu = [np.array(c["events"], dtype=np.float64) for c in run["envelope"]["result"]["cpus"]]
    return [("this VM, CPUs 0-1", vm), ("the GPU node, CPUs 4 and 12", gpu)]


@dataclass(frozen=True)
class Cell:
    template: int
    cpus: int
    k: int
    strength: float  # % of a CPU
    replay: int
    look: bool = True  # the search's last look (attribution.noise.LAST_LOOK)


@dataclass(frozen=True)
class Outcome:
    found: int  # planted CPUs on which the train was found
    told: int  # of those, the ones the screen names it on
    ms_per_cpu_s: float
    events_per_cpu_s: float


def plant(cell: Cell, hz: float, pairs: list[np.ndarray]) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[int]]:
    """The replay of `cell`, and the CPUs the train was planted on."""
    seed = hash((cell.template, cell.cpus, cell.k, cell.strength, cell.replay)) % 2**32  # one replay either look
    rng = np.random.default_rng(seed)
    span = SPAN_S * 1e9
    cpus = replayed(pairs, cell.cpus, span, seed=seed)
    chosen = sorted(int(c) for c in rng.choice(cell.cpus, size=cell.k, replace=False))
    length = cell.strength / 100 * 1e9 / hz
    for c in chosen:
        cpus[c] = with_train(cpus[c], span, hz, length, rng, JITTER_NS)
    return [merged(*c) if k not in chosen else c for k, c in enumerate(cpus)], chosen


def one(cell: Cell, hz: float, pairs: list[np.ndarray]) -> Outcome:
    """One replay analysed in this process (no pool: its CPU time is this process's), then its screen."""
    from quietcore import measure
    from quietcore.attribution import noise
    from quietcore.peers.traces import CpuGaps
    from quietcore.report import account, summary
    from quietcore.runs.analysis import same_source

    cpus, chosen = plant(cell, hz, pairs)
    gaps = [CpuGaps("bench", 0, c, s, d) for c, (s, d) in enumerate(cpus)]
    noise.PARALLEL_FROM = noise.SCOUTS_PARALLEL_FROM = 10**9
    noise.LAST_LOOK = cell.look
    stamps: list[float] = []  # from the first CPU's start, as bench/manycpu.py's split() measures the analysis
    ((_, _, run),) = measure.imported_noise(gaps, SPAN_S * 1e9, "recall",
                                            on_cpu=lambda _: stamps.append(time.process_time()))  # fmt: skip
    spent = time.process_time() - stamps[0]
    length = cell.strength / 100 * 1e9 / hz
    analyses = {a.cpu: a for a in run.noise.cpus}

    def planted(p: object) -> bool:
        return same_source(hz, length, p.frequency_hz, p.median_duration_ns)  # type: ignore[attr-defined]

    found = [c for c in chosen if any(planted(p) for p in analyses[c].periodic)]
    said = summary.screen(run.summary, run.noise.cpus, account.of_run(run), {}, [], "--cpu {cpu}")
    told = [c for c in found if c in said.told_sources and any(planted(p) for p in said.told_sources[c])]
    events = sum(len(s) for s, _ in cpus)
    return Outcome(len(found), len(told), spent * 1e3 / (cell.cpus * SPAN_S), events / (cell.cpus * SPAN_S))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpus", default="16,64,384")
    parser.add_argument("--k", default="1,2,8", help="CPUs the train is planted on")
    parser.add_argument("--strength", default="0.05,0.1,0.2,0.5,1", help="the train's share of a CPU, in %%")
    parser.add_argument("--replays", type=int, default=5)
    parser.add_argument("--hz", type=float, default=37.0)
    parser.add_argument("--traces", type=Path, help="a directory of *.trace files to replay instead")
    parser.add_argument("--jobs", type=int, default=2, help="replays analysed at once (each in one process)")
    parser.add_argument(
        "--look",
        choices=("both", "on", "off"),
        default="both",
        help="the search's last look: each replay analysed with it and without (the peer), or one",
    )
    args = parser.parse_args()
    sets = templates(args.traces)
    sizes = [int(x) for x in args.cpus.split(",")]
    ks = [int(x) for x in args.k.split(",")]
    strengths = [float(x) for x in args.strength.split(",")]
    looks = {"both": (False, True), "on": (True,), "off": (False,)}[args.look]
    cells = [Cell(t, n, k, s, r, look) for t in range(len(sets)) for n in sizes for k in ks if k <= n
             for s in strengths for r in range(args.replays) for look in looks]  # fmt: skip
    with ProcessPoolExecutor(args.jobs) as pool:
        results = dict(zip(cells, pool.map(one, cells, [args.hz] * len(cells),
                                           [sets[c.template][1] for c in cells]), strict=True))  # fmt: skip
    print(f"A {args.hz:g} Hz train planted on k of N CPUs, {args.replays} replays of {SPAN_S:g} s each.")
    print("found: planted CPUs that found it. told: replays whose screen named it on every CPU that found it.")
    ok = True
    for look in looks:
        print(f"\n## the search {'with' if look else 'without'} its last look")
        for t, (name, _) in enumerate(sets):
            print(f"\n{name}")
            head = "  ".join(f"{s:>5g}% of a CPU   " for s in strengths)
            print(f"{'N':>4} {'k':>2}  {head}  ms/CPU-s of budget")
            for n in sizes:
                for k in (k for k in ks if k <= n):
                    row, costs, rates = [], [], []
                    for s in strengths:
                        mine = [results[Cell(t, n, k, s, r, look)] for r in range(args.replays)]
                        found = sum(o.found for o in mine) / (k * args.replays)
                        told = sum(o.told == o.found for o in mine)
                        row.append(f"found {found:4.0%} told {told}/{args.replays}")
                        costs += [o.ms_per_cpu_s for o in mine]
                        rates += [o.events_per_cpu_s for o in mine]
                        if look == looks[-1] and n == max(sizes) and s >= FROM_STRENGTH and found < RECALL:
                            ok = False
                    cost = statistics.median(costs)
                    budget = BUDGET_MS * max(1.0, statistics.median(rates) / BUDGET_RATE)
                    ok &= look != looks[-1] or cost <= budget
                    print(f"{n:>4} {k:>2}  " + "  ".join(row) + f"  {cost:8.2f} of {budget:.2f}")
    if len(looks) == 2:
        ratios = [results[replace(c, look=True)].ms_per_cpu_s / results[c].ms_per_cpu_s for c in cells if not c.look]
        for n in sizes:
            mine = [r for c, r in zip([c for c in cells if not c.look], ratios, strict=True) if c.cpus == n]
            print(
                f"the last look's cost at {n} CPUs: {statistics.median(mine):.2f} times the search's without it "
                f"(the median replay; {min(mine):.2f}-{max(mine):.2f})"
            )
    print(
        f"\n{'PASS' if ok else 'MISS'}: at {max(sizes)} CPUs, {RECALL:.0%} of the planted CPUs found from "
        f"{FROM_STRENGTH:g}% of a CPU, with the last look; the analysis within {BUDGET_MS:g} ms a CPU-second at "
        f"{BUDGET_RATE:,.0f} events a CPU-second"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

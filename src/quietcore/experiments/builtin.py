"""The built-in experiments, planned for this node's real topology. Each
has a full form (the seed's parameters where they are practical) and a
--quick form sized to finish in about a minute on a 2-vCPU VM."""

from __future__ import annotations

from collections.abc import Callable

from quietcore.errors import UsageError
from quietcore.experiments.model import Cell, Experiment, Load
from quietcore.experiments.node import Node
from quietcore.facts.cpulist import format_cpulist
from quietcore.levers.preempt import PreemptLever
from quietcore.tune.plan import choose

REPS = 10
WARMUP = 1


def _reps(quick: bool, cells: list[Cell], full: int) -> int:
    """--quick: the fewest runs that still show a real difference across
    this many comparisons (stats.compare.quick_reps); else `full`."""
    from quietcore.stats.compare import quick_reps  # numpy: not for listing the experiments

    return quick_reps(sum(not c.baseline for c in cells)) if quick else full


def _cpus(*cpus: int) -> str:
    return format_cpulist(frozenset(cpus))


def _burner(cpu: int, seconds: float) -> Load:
    # A competitor at SCHED_OTHER on the workload's CPU, running longer than
    # the workload; it is killed when the workload ends.
    return Load("cpuburn on the same CPU", "cpuburn", ("--cpus", str(cpu), "--seconds", f"{seconds + 30:g}"))


def tickless(node: Node, quick: bool, priority: int) -> Experiment:
    n = 600 if quick else 1000
    expected = 0.1 if quick else 0.8
    iso = sorted(node.isolated & node.allowed)
    hk = sorted(node.housekeeping)
    notes, cells = [], []
    args = ("--n", str(n))
    if iso:
        threads = min(2, len(iso), len(hk))
        on_iso, on_hk = _cpus(*iso[:threads]), _cpus(*hk[-threads:])
        cells.append(
            Cell("housekeeping", "matmul", {"cpus": on_hk}, "matmul", (*args, "--cpus", on_hk), expected, baseline=True)
        )
        cells.append(Cell("isolated", "matmul", {"cpus": on_iso}, "matmul", (*args, "--cpus", on_iso), expected))
        notes.append(
            f"isolated CPUs {format_cpulist(frozenset(iso))} against housekeeping CPUs {on_hk}, {threads} threads"
        )
    else:
        threads = min(2, len(node.allowed))
        cpus = _cpus(*sorted(node.allowed)[-threads:])
        cells.append(
            Cell(
                "unpinned",
                "matmul",
                {"placement": "unpinned"},
                "matmul",
                (*args, "--threads", str(threads), "--unpinned"),
                expected,
                baseline=True,
            )
        )
        cells.append(
            Cell(
                "pinned",
                "matmul",
                {"placement": f"pinned {cpus}"},
                "matmul",
                (*args, "--threads", str(threads), "--cpus", cpus),
                expected,
            )
        )
        notes.append(
            "no isolated CPUs in this boot: pinned against unpinned here; boot with isolcpus= nohz_full= and "
            "compare the sessions (quietcore compare) for the effect of isolation"
        )
    shield = _shield_cell(node, args, expected, notes)
    cells += shield
    return Experiment(
        "tickless",
        f"matmul {n}x{n}, {threads} threads: isolation and pinning" + (", shielded and not" if shield else ""),
        cells,
        _reps(quick, cells, REPS),
        WARMUP,
        notes,
    )


def _shield_cell(node: Node, args: tuple[str, ...], expected: float, notes: list[str]) -> list[Cell]:
    """In-boot isolation: matmul on the CPUs `tune` would shield, with the
    shield up (cpusets, IRQs, workqueues, threads moved: `tune`'s run-time
    part as a temporary lever) against the same placement without it."""

    try:
        _, targets = choose(node.topology)
    except UsageError as exc:
        notes.append(f"no shielded cell: {exc}")
        return []
    targets &= node.allowed
    if not targets:
        return []
    on = _cpus(*sorted(targets)[:2])
    work = (*args, "--cpus", on)
    notes.append(f"shielded against unshielded on CPUs {on}: `quietcore tune`'s run-time part, put back after each "
                 "run; the tick stays (nohz_full needs a reboot: compare sessions across boots for it)")  # fmt: skip
    return [
        Cell("unshielded", "shield", {"shield": "off", "cpus": on}, "matmul", work, expected, baseline=True),
        Cell("shielded", "shield", {"shield": "on", "cpus": on}, "matmul", work, expected,
             levers={"shield": format_cpulist(targets)}),
    ]  # fmt: skip


SCHED_WORKLOADS: dict[str, tuple[tuple[str, ...], tuple[str, ...], float, float]] = {
    # workload: (quick args, full args, quick seconds, full seconds)
    "compute": (("--iters", "60000000"), ("--iters", "2000000000"), 0.1, 3.2),
    # quick: 4x a 32 MiB L3, still memory-bound; 256M x 6 took 0.4 s a run here (0.18 s of it
    # measured), four times the 0.1 s it was meant to, and was most of `run sched --quick`.
    "memory": (("--size", "128M", "--passes", "4"), ("--size", "1G", "--passes", "4"), 0.1, 0.2),
    "io": (("--size", "32M", "--mode", "buffered"), ("--size", "512M", "--mode", "buffered"), 0.05, 0.6),
    "mixed": (
        ("--iters", "600", "--every", "100", "--checkpoint", "1M"),
        ("--iters", "3000", "--every", "300"),
        0.1,
        0.6,
    ),
}


def sched(node: Node, quick: bool, priority: int) -> Experiment:
    cpu = node.work_cpu
    cells = []
    for workload, (q_args, f_args, q_s, f_s) in SCHED_WORKLOADS.items():
        base, seconds = (q_args, q_s) if quick else (f_args, f_s)
        for policy in ("other", "fifo", "rr"):
            for loaded in (False, True):
                label = f"{workload} {policy}{' +load' if loaded else ''}"
                cells.append(Cell(
                    label, workload, {"workload": workload, "policy": policy, "load": "same-cpu" if loaded else "none"},
                    workload, (*base, "--cpus", str(cpu)), seconds * (2 if loaded else 1),
                    loads=(_burner(cpu, seconds),) if loaded else (), baseline=policy == "other" and not loaded,
                    policy=policy, priority=0 if policy == "other" else priority,
                ))  # fmt: skip
    notes = [
        f"workloads pinned to CPU {cpu}; fifo and rr at priority {priority}; the load is a SCHED_OTHER cpuburn",
        "io times buffered writes into the page cache; their writeback is forced after the measured region",
    ]
    return Experiment(
        "sched",
        "scheduling policy x workload, with and without a competitor on the CPU",
        cells,
        _reps(quick, cells, REPS),
        WARMUP,
        notes,
    )


def preempt(node: Node, quick: bool, priority: int) -> Experiment:
    """Under the running model, and under every other one when the kernel can
    switch at run time."""
    lever = PreemptLever()
    ok, why = lever.available()
    notes = []
    if ok:
        current = lever.read()
        models = [current] + [m for m in lever.choices() if m != current]
    else:
        models = ["current"]  # the running model, unswitched: no lever
        notes.append(f"only the running model is measured: {why}")
    # Long enough to meet the disturbance (every 300 ms) at least twice.
    n = 1000 if quick else 1500
    expected = 0.6 if quick else 2.0
    cpu = node.work_cpu
    cells = []
    for model in models:
        levers = {"preempt": model} if ok else {}
        for disturbed in (False, True):
            label = f"{model} {'disturbed' if disturbed else 'stable'}"
            load = Load(
                "seed disturbance on the same CPU",
                "disturb",
                ("--cpus", str(cpu), "--preset", "seed", "--duration", f"{expected * 3 + 30:g}"),
            )
            cells.append(Cell(
                label, "matmul", {"preempt": model, "disturbance": "same-cpu" if disturbed else "none"}, "matmul",
                ("--n", str(n), "--threads", "1", "--cpus", str(cpu)), expected, levers=levers,
                loads=(load,) if disturbed else (), baseline=model == models[0] and not disturbed,
            ))  # fmt: skip
    notes.append(
        f"matmul {n}x{n} on CPU {cpu}; the disturbance is the seed's thread: every 300 ms, 1e7 additions, SCHED_OTHER"
    )
    return Experiment(
        "preempt", "preemption model, stable and disturbed matmul", cells, _reps(quick, cells, REPS), WARMUP, notes
    )


def _burn(label: str, layout: str, seconds: float, threads: int, cpus: str | None, baseline: bool = False) -> Cell:
    """A cpuburn cell: `threads` threads pinned to `cpus` (None: unpinned)."""
    args = ["--seconds", f"{seconds:g}", "--threads", str(threads)]
    args += ["--cpus", cpus] if cpus else ["--unpinned"]
    factors = {"threads": str(threads), "layout": layout}
    return Cell(label, "cpuburn", factors, "cpuburn", tuple(args), seconds, baseline=baseline)


def affinity(node: Node, quick: bool, priority: int) -> Experiment:
    seconds = 0.3 if quick else 5.0
    a = node.work_cpu
    b = node.other_core(a)
    cells = [
        _burn("one unpinned", "unpinned", seconds, 1, None, baseline=True),
        _burn("one pinned", f"CPU {a}", seconds, 1, str(a)),
        _burn("two unpinned", "unpinned", seconds, 2, None),
        _burn("two on one CPU", f"CPU {a} twice", seconds, 2, str(a)),
    ]
    skipped = []
    if b is None:
        skipped.append(("two on different cores", "this node has only one core available"))
    else:
        cells.append(_burn("two on different cores", f"CPUs {a},{b}", seconds, 2, _cpus(a, b)))
    notes = ["metric: ns per iteration of the average thread, the time a fixed amount of work per thread takes"]
    return Experiment(
        "affinity", f"cpuburn layouts, {seconds:g} s each", cells, _reps(quick, cells, 5), WARMUP, notes, skipped
    )


def thp(node: Node, quick: bool, priority: int) -> Experiment:
    size = "64M" if quick else "1G"
    cpu = node.work_cpu
    cells = []
    for pattern in ("seq", "stride", "random"):
        for mode in ("never", "madvise", "always"):
            # Under madvise only a program that asks gets huge pages: that
            # cell's program asks; the others are unmodified programs.
            args: tuple[str, ...] = ("--size", size, "--pattern", pattern, "--cpus", str(cpu))
            if mode == "madvise":
                args += ("--hugepage",)
            cells.append(Cell(
                f"{pattern} {mode}", pattern, {"pattern": pattern, "thp": mode,
                                               "madvise": "yes" if mode == "madvise" else "no"},
                "memscan", args, 0.3 if quick else 4.0, levers={"thp": mode}, baseline=mode == "never",
            ))  # fmt: skip
    notes = [f"memscan over {size} on CPU {cpu}; stride is 4096 B (one access per page); the madvise cells call "
             "madvise(MADV_HUGEPAGE), the others do not"]  # fmt: skip
    return Experiment("thp", "transparent huge pages x access pattern", cells, _reps(quick, cells, 5), WARMUP, notes)


def smt(node: Node, quick: bool, priority: int) -> Experiment:
    seconds = 0.3 if quick else 5.0
    a = node.work_cpu
    cells = [_burn("alone", "alone", seconds, 1, str(a), baseline=True)]
    skipped: list[tuple[str, str]] = []
    sibling, other = node.sibling_of(a), node.other_core(a)
    if sibling is None:
        why = f"no SMT sibling of CPU {a} (smt: {node.smt or 'unknown'}): this node has one thread per core"
        skipped.append(("SMT siblings", why))
    else:
        cells.append(_burn("SMT siblings", f"CPUs {a},{sibling}", seconds, 2, _cpus(a, sibling)))
    if other is None:
        skipped.append(("different cores", "only one core available"))
    else:
        cells.append(_burn("different cores", f"CPUs {a},{other}", seconds, 2, _cpus(a, other)))
    return Experiment(
        "smt",
        "two threads on SMT siblings or separate cores, normalised to one alone",
        cells,
        _reps(quick, cells, 5),
        WARMUP,
        [],
        skipped,
    )


STRIDES = (1, 2, 4, 8, 16, 32, 64, 128)


def prefetch(node: Node, quick: bool, priority: int) -> Experiment:
    size, accesses = ("64M", "2000000") if quick else ("256M", "16777216")
    cpu = node.work_cpu
    common = ("--size", size, "--accesses", accesses, "--cpus", str(cpu))
    cells = [
        Cell(
            f"stride {s}", "stride", {"stride": str(s)}, "stride", (*common, "--stride", str(s)), 0.05, baseline=s == 1
        )
        for s in STRIDES
    ]
    cells.append(Cell("random", "stride", {"stride": "random"}, "stride", (*common, "--pattern", "random"), 0.05))
    notes = [f"{accesses} loads of 8 B at every point over {size} on CPU {cpu}; strides in elements of 8 B"]
    return Experiment(
        "prefetch",
        "equal-work stride sweep against sequential and random references",
        cells,
        _reps(quick, cells, 5),
        WARMUP,
        notes,
    )


def numa(node: Node, quick: bool, priority: int) -> Experiment:
    size = "64M" if quick else "512M"
    nodes = sorted(n for n, cpus in node.topology.nodes.items() if cpus & node.allowed)
    mem_nodes = sorted(node.topology.nodes)
    cells, notes = [], []
    for c in nodes:
        for m in mem_nodes:
            cells.append(Cell(
                f"cpu node {c} / mem node {m}", f"cpu node {c}", {"cpu_node": str(c), "mem_node": str(m)}, "numa",
                ("--cpu-node", str(c), "--mem-node", str(m), "--size", size), 0.3, baseline=c == m,
            ))  # fmt: skip
    if len(mem_nodes) == 1:
        notes.append("one NUMA node: the 1x1 matrix is measured, but there is no remote memory to compare")
    distances = node.topology.distances
    if distances:
        notes.append(
            "firmware distances (SLIT): " + "; ".join(f"node {n}: {row}" for n, row in sorted(distances.items()))
        )
    exp = Experiment(
        "numa", "bandwidth and latency, CPU node x memory node", cells, _reps(quick, cells, 5), WARMUP, notes
    )
    exp.data["distances"] = {str(n): row for n, row in distances.items()}
    return exp


Planner = Callable[[Node, bool, int], Experiment]

BUILTIN: dict[str, Planner] = {
    "tickless": tickless,
    "sched": sched,
    "preempt": preempt,
    "affinity": affinity,
    "thp": thp,
    "smt": smt,
    "prefetch": prefetch,
    "numa": numa,
}

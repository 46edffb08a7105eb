"""User-defined experiments: `--cmd` with `--factor` options, or a TOML file.

    reps = 8                 # optional (default 10)
    warmup = 1               # optional (default 1)
    seed = 7                 # optional
    [factors]                # every combination is a cell
    policy = ["other", "fifo"]
    thp = ["never", "always"]
    [baseline]               # optional; default: the first value of each factor
    policy = "other"
    [[workload]]
    name = "memscan"         # a built-in workload, with its options
    args = ["--pattern", "random", "--size", "64M"]
    [[workload]]
    cmd = "make -j2"         # or any command (no shell), measured from outside
    metric = ["jmh"]         # optional, with cmd: its own figures (--metric), the first the verdict's
    metric_of = "median"     # optional: median, mean or last of a run's samples

Factors: policy (other, batch, idle, fifo, rr, deadline), priority (1-99),
cpus (a CPU list, or "any"), load and disturb (none, same-cpu, sibling,
other-core: a cpuburn competitor, or the seed's disturbance thread, placed
from the real topology relative to the workload's first CPU), the levers thp,
thp_defrag, governor, preempt (values as this kernel offers them), and
replicate (any names: a factor that changes nothing, cells alike but for
their name, for an A/A test of the verdicts: `--factor replicate=a,b`)."""

from __future__ import annotations

import itertools
import shlex
from pathlib import Path
from typing import Any

from quietcore import inputs
from quietcore.errors import UsageError
from quietcore.experiments.custom_exec import check_argv
from quietcore.experiments.levers import NAMES as LEVERS
from quietcore.experiments.metric import parse_metric, parse_metric_of
from quietcore.experiments.model import Cell, Experiment, Load
from quietcore.experiments.node import Node
from quietcore.facts.cpulist import format_cpulist, parse_cpulist
from quietcore.options import cpus_option
from quietcore.sched import PRIORITY_MIN, check_policy, check_priority, is_rt

WORKLOADS = ("matmul", "compute", "memory", "io", "mixed", "cpuburn", "memscan", "stride", "stream", "numa")
FACTORS = ("policy", "priority", "cpus", "load", "disturb", "replicate", *LEVERS)
LOADS = ("none", "same-cpu", "sibling", "other-core")  # where a competitor or disturbance goes
EXPECTED_S = 2.0  # a user workload's length is unknown; the watchdog allows far more


def _check_factor(name: str, values: list[str], where: str, node: Node) -> None:
    if name not in FACTORS:
        raise UsageError(f"{where}: unknown factor {name!r} (valid: {', '.join(FACTORS)})")
    if not values:
        raise UsageError(f"{where}: factor {name!r} has no values")
    for v in values:
        if name == "policy":
            check_policy(v, "policy", deadline=True, context=where)
        if name in ("load", "disturb") and v not in LOADS:
            raise UsageError(f"{where}: invalid {name} {v!r} (valid: {', '.join(LOADS)})")
        if name == "priority":
            check_priority(v, "priority", context=where)
        if name == "replicate" and not (v.isidentifier() and len(v) <= 32):
            raise UsageError(f"{where}: invalid replicate {v!r} (valid: names of letters, digits and _, up to 32)")
        if name == "cpus" and v != "any":
            try:
                cpus_option(v, node.allowed, "cpus")
            except UsageError as exc:
                raise UsageError(f"{where}: {exc}; or any") from None


def _load(kind: str, where: str, cpu: int | None, node: Node) -> Load:
    """A competitor (load: a cpuburn) or a disturbance (disturb: the seed's
    thread, every 300 ms 1e7 additions) placed relative to the workload's CPU."""
    if cpu is None:
        raise UsageError(f"factor {kind}={where} needs a cpus factor: it is placed relative to the workload's CPU")
    target = {"same-cpu": cpu, "sibling": node.sibling_of(cpu), "other-core": node.other_core(cpu)}[where]
    if target is None:
        raise UsageError(f"factor {kind}={where}: CPU {cpu} has no {where.replace('-', ' ')} on this node")
    if kind == "load":
        return Load(f"cpuburn on {where} (CPU {target})", "cpuburn", ("--cpus", str(target), "--seconds", "3600"))
    return Load(f"disturbance on {where} (CPU {target})", "disturb",
                ("--cpus", str(target), "--preset", "seed", "--duration", "3600"))  # fmt: skip


def _workload_cell(
    label: str, group: str, factors: dict[str, str], workload: dict[str, Any], node: Node, baseline: bool
) -> Cell:
    policy = factors.get("policy", "other")
    # A priority only means something to fifo and rr (1 unless given).
    priority = int(factors.get("priority", str(PRIORITY_MIN))) if is_rt(policy) else 0
    cpus_text = factors.get("cpus", "any")
    cpus = frozenset() if cpus_text == "any" else parse_cpulist(cpus_text)
    loads = tuple(
        _load(kind, where, min(cpus) if cpus else None, node)
        for kind in ("load", "disturb")
        if (where := factors.get(kind, "none")) != "none"
    )
    # shield=off: a cell without the shield, to compare with the shielded ones
    levers = {k: v for k, v in factors.items() if k in LEVERS and (k, v) != ("shield", "off")}
    if "cmd" in workload:
        if policy == "deadline":
            raise UsageError("policy deadline is only available for built-in workloads, not for a command")
        return Cell(label, group, factors, "exec", (), EXPECTED_S, levers, loads, baseline,
                    argv=tuple(shlex.split(workload["cmd"])), cpus=cpus, policy=policy, priority=priority,
                    metrics=workload.get("_metrics", ()), metric_of=workload.get("metric_of", "median"))  # fmt: skip
    args = [str(a) for a in workload.get("args", [])]
    if cpus:
        args += ["--cpus", format_cpulist(cpus)]
    return Cell(label, group, factors, workload["name"], tuple(args), EXPECTED_S, levers, loads, baseline,
                policy=policy, priority=priority)  # fmt: skip


def build(
    name: str,
    factors: dict[str, list[str]],
    workloads: list[dict[str, Any]],
    baseline: dict[str, str],
    node: Node,
    reps: int,
    warmup: int,
    where: str,
) -> Experiment:
    for key, values in factors.items():
        _check_factor(key, values, where, node)
    for key, value in baseline.items():
        if key not in factors or value not in factors[key]:
            raise UsageError(f"{where}: baseline {key}={value!r} is not one of the factor's values")
    chosen = {k: baseline.get(k, v[0]) for k, v in factors.items()}
    cells = []
    keys = list(factors)
    for w in workloads:
        if "cmd" in w:
            argv = shlex.split(str(w["cmd"]))
            check_argv(argv, f"{where}: cmd")
            group = str(w.get("label") or argv[0])
        else:
            if w.get("name") not in WORKLOADS:
                raise UsageError(f"{where}: unknown workload {w.get('name')!r} (valid: {', '.join(WORKLOADS)})")
            group = str(w.get("label") or w["name"])
        for combo in itertools.product(*(factors[k] for k in keys)):
            f = dict(zip(keys, combo, strict=True))
            label = " ".join([group, *(f"{k}={v}" for k, v in f.items() if len(factors[k]) > 1)])
            cells.append(_workload_cell(label, group, f, w, node, baseline=f == chosen))
    labels = [c.label for c in cells]
    if len(set(labels)) != len(labels):
        raise UsageError(f"{where}: two workloads share a name: give them a label")
    return Experiment(name, f"{len(cells)} cells", cells, reps, warmup)


def from_cmd(cmd: str, factor_items: list[str], node: Node, reps: int, warmup: int) -> Experiment:
    factors: dict[str, list[str]] = {}
    for item in factor_items:
        key, sep, values = item.partition("=")
        if not sep or not values:
            raise UsageError(f"invalid --factor {item!r} (expected NAME=V1,V2; names: {', '.join(FACTORS)})")
        factors[key.strip()] = [v.strip() for v in values.split(",") if v.strip()]
    return build("custom", factors, [{"cmd": cmd}], {}, node, reps, warmup, "--factor")


def from_file(path: Path, node: Node, reps: int | None, warmup: int | None) -> tuple[Experiment, int | None]:
    """The experiment and the file's seed (None when it names none)."""
    data = inputs.read_toml(path, inputs.EXPERIMENT, "invalid --file")
    where = str(path)
    known = {"name", "reps", "warmup", "seed", "factors", "baseline", "workload"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (valid: {', '.join(sorted(known))})")
    workloads = data.get("workload")
    if not isinstance(workloads, list) or not workloads or not all(isinstance(w, dict) for w in workloads):
        raise UsageError(f"{where}: expected at least one [[workload]] table with name = ... or cmd = ...")
    for w in workloads:
        if ("cmd" in w) == ("name" in w):
            raise UsageError(f'{where}: each [[workload]] needs exactly one of name = "..." or cmd = "..."')
        if not isinstance(w.get("args", []), list):
            raise UsageError(f'{where}: args must be a list of strings, like ["--size", "64M"]')
        if "metric" in w or "metric_of" in w:
            if "cmd" not in w:
                raise UsageError(f"{where}: metric goes with a cmd workload (a built-in one has its own)")
            raw_metrics = w.get("metric", [])
            if isinstance(raw_metrics, str):
                raw_metrics = [raw_metrics]
            if not isinstance(raw_metrics, list) or not all(isinstance(m, str) for m in raw_metrics):
                raise UsageError(f'{where}: metric must be a list of strings, like ["jmh"]')
            w["_metrics"] = tuple(parse_metric(m, f"{where}: metric") for m in raw_metrics)
            if "metric_of" in w:
                parse_metric_of(str(w["metric_of"]), f"{where}: metric_of")
            elif not w["_metrics"]:
                raise UsageError(f"{where}: metric is empty")
    raw = data.get("factors", {})
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: [factors] must be a table of lists")
    factors = {k: [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in raw.items()}
    baseline = {k: str(v) for k, v in data.get("baseline", {}).items()}
    file_reps, file_warmup = data.get("reps", 10), data.get("warmup", 1)
    for key, value in (("reps", file_reps), ("warmup", file_warmup)):
        if not isinstance(value, int) or value < (1 if key == "reps" else 0) or value > 10000:
            raise UsageError(f"{where}: invalid {key} {value!r} (valid: {1 if key == 'reps' else 0}-10000)")
    seed = data.get("seed")
    if seed is not None and not isinstance(seed, int):
        raise UsageError(f"{where}: invalid seed {seed!r} (an integer)")
    reps = reps if reps is not None else file_reps
    warmup = warmup if warmup is not None else file_warmup
    exp = build(str(data.get("name", path.stem)), factors, workloads, baseline, node, reps, warmup, where)
    return exp, seed

"""Shield CPUs from OS noise: plan from the topology, apply, verify, revert.

  quietcore tune plan [--cpus LIST | --housekeeping LIST] [--profile P] [--root DIR] [--json]
  quietcore tune apply [--plan FILE | same options] [--dry-run] [--yes]
  quietcore tune verify
  quietcore tune revert [--all | --to ID]
  quietcore tune prove [same options as plan] [--duration S] [--rounds N] [--seed N] [--experiment NAME] [--keep]

`plan` picks housekeeping CPUs (the first core of each NUMA node, SMT
siblings together) and lists each knob with its current and planned value:
the boot part (isolcpus, nohz_full, rcu_nocbs, irqaffinity, as GRUB, grubby
and kernel-install lines; refused where this kernel would ignore it) and the
run-time part (device IRQs, the default IRQ affinity, the workqueue masks,
NUMA balancing, THP for the latency profile). `apply` journals each old
value before writing it, reads every knob back and reports what the kernel
refused; the changes stay until `revert`, which restores exactly what was
there, newest first, also after a crash. `verify` says which changes are no
longer in force and who is likely to blame (exit 1). `prove` measures noise
on the targets with the run-time part off and on, in shuffled rounds, and
prints what it bought per CPU with a verdict (the tuning is undone after
unless --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sqlite3
import stat
import sys
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rich.table import Table

from quietcore import inputs, outputs
from quietcore.actions import Action
from quietcore.commands import common
from quietcore.errors import CommandError, UsageError
from quietcore.experiments.builtin import BUILTIN
from quietcore.experiments.node import read_node
from quietcore.facts.cpulist import counted, cpus_phrase, format_cpulist, parse_cpulist
from quietcore.facts.memory import available_bytes
from quietcore.facts.root import Root
from quietcore.facts.snapshot import open_root
from quietcore.levers.journal import Journal, node_journal
from quietcore.levers.names import NAMES
from quietcore.options import duration_option, int_in_range
from quietcore.probes.noise import NoiseOptions, event_cap
from quietcore.report import text
from quietcore.report.kinds import prove as shown
from quietcore.safe import plain, write_atomic
from quietcore.store import journal
from quietcore.store.sessions import now_iso
from quietcore.tune import state
from quietcore.tune.gpumap import launcher_lines
from quietcore.tune.plan import Item, Plan, make_plan, scripts, tuned_profile

if TYPE_CHECKING:
    from quietcore.tune.plan import Plan

NAME = "tune"
ACTIONS = ("plan", "apply", "verify", "revert", "prove")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", metavar="ACTION", choices=ACTIONS, help=f"one of: {', '.join(ACTIONS)}")
    parser.add_argument("--cpus", metavar="LIST", help="the CPUs to shield (default: all but the housekeeping)")
    parser.add_argument("--housekeeping", metavar="LIST", help="the CPUs that keep the housekeeping")
    parser.add_argument("--profile", default="throughput", help="throughput (default) or latency")
    parser.add_argument("--root", metavar="DIR", default="/", help="plan from DIR or a snapshot .tar.gz")
    parser.add_argument("--ranks-per-gpu", metavar="N",
                        help="plan: each GPU's N ranks and the target CPUs near it each gets (1-1024)")  # fmt: skip
    parser.add_argument(
        "--no-shield",
        action="store_true",
        help="no cpusets: move threads by affinity alone (new tasks may then start on the targets)",
    )
    parser.add_argument("--allow-rt-unthrottled", action="store_true",
                        help="lift RT throttling (sched_rt_runtime_us -1) while tuned; put back by revert")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the plan or the outcome as JSON")
    parser.add_argument(
        "--export", nargs=2, metavar=("KIND", "PATH"),
        help="plan: write a tuned profile (tuned DIR) or shell scripts (script FILE, FILE.revert)",
    )  # fmt: skip
    parser.add_argument("--plan", metavar="FILE", help="apply: the run-time part of a saved `tune plan --json`")
    parser.add_argument("--dry-run", action="store_true", help="apply: print what would be written, write nothing")
    parser.add_argument("--yes", action="store_true", help="apply: do not ask")
    parser.add_argument("--to", metavar="ID", help="revert: only the changes after journal entry ID")
    parser.add_argument("--all", action="store_true", help="revert: every kept change (the default)")
    parser.add_argument("--duration", metavar="S", default="10", help="prove: seconds of noise per measurement")
    parser.add_argument("--rounds", metavar="N", default="5", help="prove: rounds of before and after (default 5)")
    parser.add_argument("--seed", metavar="N", help="prove: the seed of the rounds' order (default: random, printed)")
    parser.add_argument("--keep", action="store_true", help="prove: keep the tuning afterwards")
    parser.add_argument("--experiment", metavar="NAME",
                        help="prove: also run the workloads of this experiment that run on the targets")  # fmt: skip
    common.add_tags(parser)
    common.add_db(parser)
    common.add_wait(parser)


def run(args: argparse.Namespace) -> int:
    if args.action != "plan" and args.ranks_per_gpu:
        raise UsageError(f"invalid --ranks-per-gpu for tune {args.action}: a plan's option (tune plan)")
    if args.action != "plan" and args.root != "/":
        raise UsageError(f"invalid --root for tune {args.action}: only a plan reads another root (valid: /)")
    if args.action == "plan":
        return _plan(args)
    if args.action == "apply":
        return _apply(args)
    if args.action == "verify":
        return _verify(args)
    if args.action == "prove":
        return _prove(args)
    return _revert(args)


def _make(args: argparse.Namespace, root_path: str) -> Plan:
    with open_root(root_path) as root:
        per_gpu = int_in_range(args.ranks_per_gpu, "--ranks-per-gpu", 1, 1024) if args.ranks_per_gpu else None
        return make_plan(root, args.cpus, args.housekeeping, args.profile, shield=not args.no_shield,
                         rt_unthrottled=args.allow_rt_unthrottled, ranks_per_gpu=per_gpu)  # fmt: skip


def _plan(args: argparse.Namespace) -> int:
    plan = _make(args, args.root)
    if args.export:
        return _export(plan, *args.export)
    if args.json:
        print(json.dumps(plan.to_json(), indent=2))
    else:
        show_plan(plan)
    return 0


def say(*items: Any) -> None:
    """What a person reads, on stdout, wrapped and fitted to its width (report.screen)."""
    text.console().print(*items)


def _table(rows: Sequence[tuple[str, ...]], head: tuple[str, ...], title: str | None = None) -> Table:
    """Rows under their headers, as the screen fits them (report.screen)."""
    table = Table(title=title, title_justify="left")
    for name in head:
        table.add_column(name)
    for row in rows:
        table.add_row(*(plain(c) for c in row))
    return table


#: The actions that move a task or a kthread: one row for them all, in the plan and in apply.
_THREADS = ("task-affinity", "cpuset-task")
_T = TypeVar("_T")


def _grouped(entries: Sequence[_T], key: Callable[[_T], Hashable | None], one: Callable[[_T], tuple[str, ...]],
             many: Callable[[list[_T]], tuple[str, ...]]) -> list[tuple[str, ...]]:  # fmt: skip
    """A table's rows in the entries' order: those of one key (not None) and more than one a row, `many`,
    where the first of them stood; every other a row of its own, `one` (the plan's and apply's tables)."""
    groups: dict[Hashable, list[_T]] = {}
    for e in entries:
        if (k := key(e)) is not None:
            groups.setdefault(k, []).append(e)
    rows: list[tuple[str, ...]] = []
    told: set[Hashable] = set()
    for e in entries:
        k = key(e)
        if k is None or len(groups[k]) == 1:
            rows.append(one(e))
        elif k not in told:
            told.add(k)
            rows.append(many(groups[k]))
    return rows


def _device_rows(items: list[Item]) -> list[tuple[str, ...]]:
    """The plan's rows, a device's IRQs that go to the same CPUs as one row ("IRQs 42-49 (NVIDIA H200 at
    0000:00:06.0)": a node of 8 GPUs and 4 HCAs has some 100): --json lists each."""

    def row(i: Item) -> tuple[str, ...]:
        return (i.knob, i.current if i.current is not None else "-", i.planned,
                "already so" if i.status == "already" else i.reason)  # fmt: skip

    def device(members: list[Item]) -> tuple[str, ...]:
        first = members[0]
        threads = sum(m.threads for m in members)
        moved = f", with their {threads} threads (the kernel moves each with its IRQ)" if threads else ""
        why = "already so" if first.status == "already" else f"the device's IRQs to a housekeeping CPU near it{moved}"
        now = {m.current for m in members}
        shown = now.pop() if len(now) == 1 else "various"
        numbers = frozenset(m.irq for m in members if m.irq is not None)
        if first.device is None:  # IRQs of no device known, alike: one row, each in --json
            return (f"IRQs {format_cpulist(numbers)}", shown or "-", first.planned,
                    "already so" if first.status == "already" else f"{first.reason}; each in --json")  # fmt: skip
        return (f"IRQs {format_cpulist(numbers)} ({first.device})", shown or "-", first.planned, why)

    def key(i: Item) -> Hashable | None:
        if i.irq is None or i.status == "refused":
            return None
        return (i.device, i.planned, i.status) if i.device is not None else (None, i.current, i.planned, i.status,
                                                                              i.reason)  # fmt: skip

    return _grouped(items, key, row, device)


def show_plan(plan: Plan) -> None:
    out = text.console()
    out.print(f"Housekeeping: {cpus_phrase(plan.housekeeping)}")
    out.print(f"Shielded, the targets: {cpus_phrase(plan.targets)}")
    out.print(f"Profile: {plan.profile}")
    out.print("")
    boot = [(i.knob, i.current if i.current is not None else "-", "not planned" if i.refused else i.planned,
             i.refused or (i.status if i.status == "already" else i.reason)) for i in plan.boot]  # fmt: skip
    out.print(_table(boot, ("parameter", "now", "planned", "why"), "Boot part, in force after a reboot"))
    for name, line in plan.boot_lines().items():
        out.print(f"  With {name}: {line}")
    out.print("")
    threads = [i for i in plan.runtime if i.action and i.action.kind in _THREADS]
    rows = _device_rows([i for i in plan.runtime if i not in threads])
    if threads:  # one line for them all: --json lists each
        kthreads = sum(i.knob.startswith("kthread") for i in threads)
        first = threads[0]
        into = first.planned.replace(" ", ", CPUs ") if first.action and first.action.kind == "cpuset-task" else ""
        into = into.rsplit("/", 1)[-1]  # the cpuset's name: its path is in --json
        rows.append((f"{len(threads)} threads, {kthreads} of them kthreads", "-", into or threads[0].planned,
                     "tasks and movable kthreads off the targets, each in --json"))  # fmt: skip
    title = "Run-time part: `quietcore tune apply` makes it, `quietcore tune revert` puts it back"
    out.print(_table(rows, ("knob", "now", "planned", "why"), title))
    moved = f", {len(threads)} of them a thread's move" if threads else ""  # the rows are fewer: threads are one
    out.print(f"{counted(len(plan.actions), 'change')} to apply{moved}.")
    for note in plan.notes:
        out.print(f"Note: {note}.")
    if plan.ranks:
        out.print("")
        gpus = len({r.gpu for r in plan.ranks})
        out.print(_table([(str(r.rank), f"GPU {r.gpu}", plain(r.device.name), str(r.device.numa_node)
                           if r.device.numa_node is not None else "unknown", format_cpulist(r.cpus))
                          for r in plan.ranks], ("rank", "GPU", "device", "NUMA node", "CPUs"),
                         f"Ranks, {len(plan.ranks)} on {gpus} {'GPU' if gpus == 1 else 'GPUs'}, each on target CPUs "
                         "near its GPU"))  # fmt: skip
        for name, line in launcher_lines(plan.ranks).items():
            out.print(f"  {name}: {line}")


def _outcome_rows(items: list[Item], outcomes: list[state.Outcome]) -> list[tuple[str, ...]]:
    """apply's table, grouped as the plan's (_device_rows, show_plan), from the plan's own items (an outcome
    each, in order, up to a refusal's stop): a device's IRQs alike (now, result) in one row, "IRQs 42-49
    (NVIDIA H200 at 0000:00:06.0)", and tasks and kthreads alike in one, "40 threads (20 kthreads)", where
    it was a row a vector and a row a thread (a node of 384 CPUs has hundreds of each). `--json` gives each."""
    Pair = tuple[Item, state.Outcome]

    def family(i: Item) -> str:
        if i.action is not None and i.action.kind in _THREADS:
            return "threads"
        return f"IRQs of {i.device}" if i.device is not None and i.irq is not None else ""

    def one(pair: Pair) -> tuple[str, ...]:
        o = pair[1]
        return (o.knob, o.old or "-", o.new, o.result)

    def many(alike: list[Pair]) -> tuple[str, ...]:
        first, o = alike[0]
        was = {x.old or "-" for _, x in alike}
        if family(first) == "threads":
            label = f"{len(alike)} threads ({sum(x.knob.startswith('kthread') for x, _ in alike)} kthreads)"
        else:
            label = f"IRQs {format_cpulist([x.irq for x, _ in alike if x.irq is not None])} ({first.device})"
        return (label, was.pop() if len(was) == 1 else "various", o.new, o.result)

    return _grouped(list(zip(items, outcomes, strict=False)),
                    lambda pair: (family(pair[0]), pair[1].new, pair[1].result) if family(pair[0]) else None,
                    one, many)  # fmt: skip


def _apply(args: argparse.Namespace) -> int:
    if args.plan and (args.cpus or args.housekeeping):
        raise UsageError("give --plan FILE or --cpus/--housekeeping, not both")
    plan = _load(args.plan) if args.plan else _make(args, "/")
    actions = plan.actions
    state.check(Root("/"), actions)  # a plan file's kinds, targets and values: refused before anything is shown
    if args.dry_run:
        for action in actions:
            say(action.text())
        say(f"{len(actions)} writes; nothing written (--dry-run).")
        return 0
    if os.geteuid() != 0:
        raise CommandError("tune apply needs root: the plan writes /proc and /sys (see `quietcore tune plan`)", 3)
    if not actions:
        say("Nothing to change: the run-time part is already in force.")
        return 0
    if not args.yes and sys.stdin.isatty():
        show_plan(plan) if not args.plan else show_targets(actions)
        if input(f"Apply these {len(actions)} changes? [y/N] ").strip().lower() not in ("y", "yes"):
            say("Nothing changed.")
            return 1
    with common.node_lock(args, (), (*NAMES, state.LEVER)), node_journal() as conn:
        outcomes = state.apply(conn, Root("/"), actions)
    if args.json:
        print(json.dumps([o.__dict__ for o in outcomes], indent=2))
    else:
        changed = [i for i in plan.runtime if i.action]  # plan.actions' items, in its order
        say(_table(_outcome_rows(changed, outcomes), ("knob", "was", "now", "result")))
        refused = sum(o.result.startswith("refused") for o in outcomes)
        say(f"{len(outcomes) - refused} changed, {refused} refused by the kernel; kept until "
              "`quietcore tune revert`. Boot part: see `quietcore tune plan`.")  # fmt: skip
    return 0


def show_targets(actions: list[Any]) -> None:
    """What a plan file will really write: each kind, target and value as
    quietcore reads them, not the file's own labels."""

    say("The plan file writes:")
    say(_table([(a.kind, plain(a.target), plain(a.value)) for a in actions], ("kind", "target", "value")))


def _load(path: str) -> Plan:
    """A plan saved with `tune plan --json`: its run-time part as it was
    planned (the values to write; the old ones are read again on apply)."""

    def item(i: dict[str, Any]) -> Item:
        a = i["action"]
        action = (
            Action(a["kind"], a["target"], a["value"], fixes=a.get("fixes"), note=a.get("note") or "") if a else None
        )
        # a device's IRQs keep their device and number, so that apply says them as the plan did
        device, irq = i.get("device"), i.get("irq")
        return Item(i["knob"], i["current"], i["planned"], i["reason"], action, i.get("refused"),
                    device=str(device) if device is not None else None,
                    irq=int(irq) if device is not None and irq is not None else None,
                    threads=int(i.get("threads") or 0))  # fmt: skip

    data = inputs.read_json(Path(path), inputs.PLAN, "invalid --plan")
    try:
        runtime = [item(i) for i in data["runtime"]]
        keep, targets = parse_cpulist(data["housekeeping"]), parse_cpulist(data["targets"])
        notes = data.get("notes", [])
        # every field the apply reads as text is text: a number as a target raised TypeError deep in the check
        acts = [x.action for x in runtime if x.action]
        texts = [
            notes,
            [x.knob for x in runtime],
            [a.kind for a in acts],
            [a.target for a in acts],
            [a.value for a in acts],
        ]
        if not all(isinstance(t, list) and all(isinstance(v, str) for v in t) for t in texts):
            raise TypeError("a knob, kind, target, value or note that is not text")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"invalid --plan {path}: not a plan from `quietcore tune plan --json` ({exc})") from exc
    return Plan(keep, targets, str(data.get("profile", "throughput")), [], runtime, list(notes))


def _open(args: argparse.Namespace) -> sqlite3.Connection | None:
    """The node journal, where tuning is recorded; None when there is none."""

    return journal.open_node(create=False)


def _verify(args: argparse.Namespace) -> int:
    conn = _open(args)
    if conn is None:
        say("Nothing tuned: no node journal yet.")
        return 0
    try:
        checked, drifts, new_irqs = state.verify(conn, Root("/"))
    finally:
        conn.close()
    if args.json:
        print(json.dumps({"checked": checked, "drifted": [d.__dict__ for d in drifts], "untuned_irqs": new_irqs}))
    else:
        for d in drifts:
            say(plain(f"DRIFTED {d.target}: set to {d.wanted}, now {d.now}. {d.blame}."))
        for line in new_irqs:
            say(f"NEW {line}")
        say(f"{checked - len(drifts)} of {checked} tuned knobs still in force.")
    return 1 if drifts else 0


def _revert(args: argparse.Namespace) -> int:
    if args.all and args.to is not None:
        raise UsageError("give --all or --to ID, not both")
    to = int_in_range(args.to, "--to", 0, 2**62) if args.to is not None else None
    conn = _open(args)
    if conn is None:
        say("Nothing to revert: no node journal yet.")
        return 0
    try:
        with common.node_lock(args, (), (*NAMES, state.LEVER)):
            lines = state.revert(conn, to)
    finally:
        conn.close()
    for line in lines:
        say(line)
    say(f"{len(lines)} change{'s' if len(lines) != 1 else ''} put back." if lines else "Nothing to revert.")
    return 0


def _prove(args: argparse.Namespace) -> int:
    from quietcore.session import Session
    from quietcore.tune import prove  # numpy: deferred, plan, apply, verify and revert need none

    duration = duration_option(args.duration, lo=0.5, hi=3600)
    rounds = int_in_range(args.rounds, "--rounds", 1, 100)
    seed = int_in_range(args.seed, "--seed", 0, 2**31) if args.seed is not None else random.randrange(2**31)
    plan = _make(args, "/")
    if os.geteuid() != 0:
        raise CommandError("tune prove needs root: it applies the plan (see `quietcore tune plan`)", 3)
    root = Root("/")
    cap, basis = event_cap(len(plan.targets), available_bytes(root), duration)
    options = NoiseOptions(plan.targets, duration, max_events=cap, max_events_basis=basis)
    workloads = _experiment_cells(args.experiment, plan.targets) if args.experiment else []
    units: dict[str, str] = {}
    path, chosen = common.db_path(args)
    text.console(stderr=True).print(f"Proving on {cpus_phrase(plan.targets)}: {rounds} rounds of {duration:g} s "
                                    f"before and after, {len(plan.actions)} run-time changes, order seed "
                                    f"{seed}.")  # fmt: skip
    with (
        common.node_lock(args, plan.targets, (*NAMES, state.LEVER)),
        Session("tune prove", path, chosen, {**common.tags(args), "seed": str(seed)}, root) as session,
        node_journal() as journal_conn,
        Journal(journal_conn, session.id) as journal,
    ):

        def measure(which: str, round_: int) -> prove.Figures:
            print(f"  round {round_ + 1}/{rounds}: {which}", file=sys.stderr)
            run_ = session.node.noise(options, trace="off")
            run_.params = {**run_.params, "tune": which, "round": round_ + 1}
            out = prove.figures(session.add(run_))
            for cell in workloads:  # the experiment's workloads, after the noise, in the same state
                params = {**cell.params(), "tune": which, "round": round_ + 1}
                work = session.add(session.node.probe(cell.command, cell.probe_args(), params, cell.expected_s))
                where = cell.args[cell.args.index("--cpus") + 1]
                out |= prove.workload_figures(work, f"{cell.command} on CPUs {where}", units)
            return out

        started = now_iso()
        rows, refusals = prove.prove(journal, root, plan.actions, rounds, seed, measure, units)
        analysis: dict[str, Any] = {
            "rows": [r.to_json() for r in rows], "refused": refusals, "seed": seed, "rounds": rounds,
            "duration_s": duration, "targets": format_cpulist(plan.targets), "changes": len(plan.actions),
            "kept": bool(args.keep),
        }  # fmt: skip
        session.record("tune-prove", {"seed": seed, "rounds": rounds, "duration_s": duration}, started, {}, analysis)
        session_id = session.id
    if args.keep:
        with node_journal() as conn:
            state.apply(conn, root, plan.actions)
    if args.json:
        print(json.dumps({"session": session_id, "seed": seed, "rows": [r.to_json() for r in rows],
                          "refused": refusals}, indent=2))  # fmt: skip
        return 0
    say(_table([shown.cells(r.to_json()) for r in rows], shown.HEADERS))
    for line in refusals:
        say(f"refused by the kernel: {line}")
    kept = "kept (`quietcore tune revert` undoes it)" if args.keep else "undone"
    say(f"Medians over {rounds} rounds each; stored as session {session_id}. The tuning is {kept}.")
    return 0


def _experiment_cells(name: str, targets: frozenset[int]) -> list[Any]:
    """The workloads of a built-in experiment (its --quick plan for this
    node) that run on the targets, a workload once: what the tuning is for.
    Levers and competing loads are left out: the tuning is the lever."""

    names = list(BUILTIN)
    if name not in names:
        raise UsageError(f"invalid --experiment {name!r} (valid: {', '.join(names)})")
    exp = BUILTIN[name](read_node(Root("/")), True, 50)
    cells, seen = [], set()
    for cell in exp.cells:
        where = cell.args[cell.args.index("--cpus") + 1] if "--cpus" in cell.args else ""
        try:
            on_targets = bool(where) and parse_cpulist(where) <= targets
        except ValueError:
            on_targets = False
        if on_targets and not cell.levers and not cell.loads and cell.command != "exec" and cell.command not in seen:
            seen.add(cell.command)
            cells.append(cell)
    if not cells:
        raise UsageError(f"invalid --experiment {name!r}: none of its workloads runs on the targets "
                         f"({format_cpulist(targets)}) on this node (valid: tickless, sched)")  # fmt: skip
    return cells


def _export(plan: Plan, kind: str, dest: str) -> int:
    path = Path(dest)
    if kind == "tuned":
        target = path / "tuned.conf"
        if target.exists():
            raise UsageError(f"invalid --export tuned {dest}: {target} exists (valid: a new or empty directory)")
        target = outputs.directory(path, "--export tuned") / target.name
        write_atomic(target, tuned_profile(plan, socket.gethostname()))
        say(f"Wrote {target}. Copy {path} to /etc/tuned/NAME/, run `tuned-adm profile NAME`, then reboot.")
        return 0
    if kind == "script":
        revert = path.with_name(path.name + ".revert")
        for p in (path, revert):
            if p.exists():
                raise UsageError(f"invalid --export script {dest}: {p} exists (valid: a new file name)")
        apply_text, revert_text = scripts(plan)
        for p, text in ((path, apply_text), (revert, revert_text)):
            p = outputs.file(p, "--export script")
            write_atomic(p, text)
            p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        say(f"Wrote {path}, which applies the run-time part, and {revert}, which puts back the values read now.")
        return 0
    raise UsageError(f"invalid --export kind {kind!r} (valid: tuned, script)")

"""`quietcore tune plan`: from the node's topology, which CPUs keep the
housekeeping and which become targets, and every knob that shields the
targets: the boot part (kernel command line, for a reboot) and the run-time
part (file writes that `tune apply` journals). Each item carries its current
value, the planned one, why, and the audit finding it fixes. A plan is
made from a Root, so it works the same on a snapshot or a fixture tree."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from quietcore import knobs
from quietcore.actions import Action
from quietcore.errors import UsageError
from quietcore.facts.cmdline import parse_cmdline
from quietcore.facts.cpulist import cpus_phrase, format_cpulist, format_cpumask, parse_cpulist
from quietcore.facts.devices import Device, irq_threads, read_devices
from quietcore.facts.irqs import read_irqs
from quietcore.facts.kernel import read_config, read_identity
from quietcore.facts.root import Root
from quietcore.facts.tasks import irqbalance_running, read_tasks
from quietcore.facts.topology import Topology, read_topology
from quietcore.knobs import pmqos
from quietcore.levers import cpuset, task
from quietcore.tune.gpumap import Rank, launcher_lines, rank_map
from quietcore.tune.state import restorable, same, shown

PROFILES = ("throughput", "latency")
WORKQUEUES = "sys/devices/virtual/workqueue"
THP = "sys/kernel/mm/transparent_hugepage/enabled"


@dataclass(frozen=True)
class Item:
    """One knob of the plan."""

    knob: str  # what a person calls it: "isolcpus", "IRQ 24 (virtio0)", "workqueue cpumask"
    current: str | None  # None: unknown (unreadable)
    planned: str
    reason: str
    action: Action | None  # None: nothing to do (already so) or refused
    refused: str | None = None  # why the kernel would ignore or refuse it
    raw: str | None = None  # the file's content now, as a revert writes it back
    device: str | None = None  # a GPU's or NIC's IRQ: the device's name ("NVIDIA H200 at 0000:00:06.0")
    irq: int | None = None  # its number
    threads: int = 0  # its threaded handlers, which the kernel moves with it

    @property
    def status(self) -> str:
        return "refused" if self.refused else ("change" if self.action else "already")

    def to_json(self) -> dict[str, Any]:
        return {"knob": self.knob, "current": self.current, "planned": self.planned, "reason": self.reason,
                "status": self.status, "refused": self.refused,
                "action": self.action.to_json() if self.action else None,
                # a device's IRQ keeps its device, so that `apply --plan` groups its vectors as the plan does
                **({"device": self.device, "irq": self.irq, "threads": self.threads} if self.device else {}),
                }  # fmt: skip


@dataclass(frozen=True)
class Plan:
    housekeeping: frozenset[int]
    targets: frozenset[int]
    profile: str
    boot: list[Item]
    runtime: list[Item]
    notes: list[str] = field(default_factory=list)  # trade-offs, and what the run-time part cannot do
    ranks: list[Rank] = field(default_factory=list)  # --ranks-per-gpu: each rank's GPU and CPUs

    @property
    def boot_words(self) -> str:
        return " ".join(i.action.target + (f"={i.action.value}" if i.action.value else "")
                        for i in self.boot if i.action)  # fmt: skip

    def boot_lines(self) -> dict[str, str]:
        """The boot part for each way distributions keep the command line."""
        words = self.boot_words
        if not words:
            return {}
        return {
            "grub": f'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX {words}" in /etc/default/grub, then update-grub '
            "on Debian and Ubuntu, grub2-mkconfig -o /boot/grub2/grub.cfg on Fedora and RHEL, and reboot",
            "grubby": f'grubby --update-kernel=ALL --args="{words}"',
            "kernel-install": f"append {words} to /etc/kernel/cmdline, then "
            'kernel-install add "$(uname -r)" "/lib/modules/$(uname -r)/vmlinuz", on BLS systems',
        }

    @property
    def actions(self) -> list[Action]:
        return [i.action for i in self.runtime if i.action]

    def to_json(self) -> dict[str, Any]:
        return {"housekeeping": format_cpulist(self.housekeeping), "targets": format_cpulist(self.targets),
                "profile": self.profile, "boot": [i.to_json() for i in self.boot], "boot_lines": self.boot_lines(),
                "runtime": [i.to_json() for i in self.runtime], "notes": self.notes,
                **({"ranks": [r.to_json() for r in self.ranks], "launch": launcher_lines(self.ranks)}
                   if self.ranks else {})}  # fmt: skip


def _cpus_option(text: str, option: str, online: frozenset[int]) -> frozenset[int]:
    try:
        cpus = parse_cpulist(text)
    except ValueError:
        cpus = frozenset()
    if not cpus or not cpus <= online:
        raise UsageError(f"invalid {option} {text!r} (valid: CPUs within {format_cpulist(online)})")
    return cpus


def choose(
    topo: Topology, targets: str | None = None, housekeeping: str | None = None
) -> tuple[frozenset[int], frozenset[int]]:
    """(housekeeping, targets). By default the first core of each NUMA node,
    with its SMT siblings, keeps the housekeeping (and the node's device
    IRQs), and the rest are targets. A choice that leaves no housekeeping
    CPU, isolates a whole NUMA node or splits a core's SMT siblings is
    refused."""
    online = topo.online
    if targets is not None and housekeeping is not None:
        raise UsageError("give --cpus or --housekeeping, not both")
    if targets is not None:
        target = _cpus_option(targets, "--cpus", online)
        keep = online - target
    elif housekeeping is not None:
        keep = _cpus_option(housekeeping, "--housekeeping", online)
        target = online - keep
    else:
        keep = frozenset()
        for cpus in topo.nodes.values():
            mine = cpus & online
            if mine:
                keep |= topo.siblings.get(min(mine), frozenset({min(mine)})) & online
        target = online - keep
    if not keep:
        raise UsageError("invalid --cpus: it leaves no housekeeping CPU (valid: a list that keeps at least one CPU)")
    if not target:
        raise UsageError(f"nothing to shield: every online CPU ({format_cpulist(online)}) is housekeeping")
    for node, cpus in sorted(topo.nodes.items()):
        mine = cpus & online
        if mine and mine <= target:
            raise UsageError(
                f"invalid CPU choice: every CPU of NUMA node {node} ({format_cpulist(mine)}) would be isolated "
                "(valid: keep at least one core per node for its housekeeping and device IRQs)"
            )
    for cpu in sorted(keep):
        split = (topo.siblings.get(cpu, frozenset({cpu})) & online) - keep
        if split:
            raise UsageError(
                f"invalid CPU choice: CPU {cpu} keeps the housekeeping but its SMT sibling "
                f"{format_cpulist(split)} would be a target (valid: whole cores)"
            )
    return keep, target


def _cpu0_can_leave(root: Root, target: frozenset[int]) -> None:
    """CPU 0 as a target only where its IRQs can leave it: on a node (an
    architecture or a platform) whose every IRQ affinity file is read-only,
    CPU 0 keeps them all, and isolating it would shield nothing."""
    if 0 not in target:
        return
    files = [f"proc/irq/{n}/smp_affinity" for n in root.listdir("proc/irq") if n.isdigit()]
    modes = [root.resolve(f).stat().st_mode for f in files if root.exists(f)]
    if modes and not any(m & 0o200 for m in modes):
        raise UsageError(
            "invalid CPU choice: CPU 0 would be isolated, but no IRQ on this node can be moved off it "
            "(every /proc/irq/N/smp_affinity is read-only) (valid: keep CPU 0 for housekeeping)"
        )


def _boot(root: Root, keep: frozenset[int], target: frozenset[int], profile: str) -> tuple[list[Item], list[str]]:
    cmdline = parse_cmdline(root.read_line("proc/cmdline") or "")
    config, where = read_config(root, read_identity(root).release)
    notes = []
    if not where:
        notes.append("the kernel config could not be read: whether this kernel honours nohz_full and rcu_nocbs "
                     "is not known")  # fmt: skip

    def without(option: str, why: str) -> str | None:
        if not where or config.get(option) == "y":
            return None
        return f"this kernel is built without {option}: {why}"

    t, k = format_cpulist(target), format_cpulist(keep)
    wanted = [
        ("isolcpus", f"managed_irq,domain,{t}", "keeps the scheduler's load balancing and managed IRQs off the "
         "targets", None),
        ("nohz_full", t, "stops the tick on a target running one task",
         without("CONFIG_NO_HZ_FULL", "the tick cannot stop on a busy CPU")),
        ("rcu_nocbs", t, "moves RCU callbacks to housekeeping kthreads",
         without("CONFIG_RCU_NOCB_CPU", "RCU callbacks run where they were queued")),
        ("irqaffinity", k, "the default affinity of IRQs from boot on", None),
    ]  # fmt: skip
    if profile == "latency":
        wanted.append(("skew_tick", "1", "offsets the CPUs' ticks so they do not contend for one lock", None))
    items = []
    for name, value, reason, refused in wanted:
        current = cmdline.get(name) if cmdline.has(name) else None
        if refused:
            items.append(Item(name, current, value, reason, None, refused))
        elif current == value:
            items.append(Item(name, current, value, reason, None))
        else:
            action = Action("boot-parameter", name, value, needs=("root", "reboot"), fixes=f"cpu.{name}")
            items.append(Item(name, current, value, reason, action))
    return items, notes


def _file(root: Root, knob: str, rel: str, planned: str, reason: str, fixes: str | None) -> Item | None:
    """A run-time knob in one file; None where the node does not have it.
    Compared and shown as `tune apply` reads it back (state.same, state.shown):
    masks as CPU sets ("3" and "00000003"), selector files by their word."""

    current = root.read_line(rel)
    if current is None:
        return None
    kind, target = "procfs" if rel.startswith("proc/") else "sysfs", f"/{rel}"
    action = None if same(kind, target, current, planned) else Action(kind, target, planned, fixes=fixes, note=knob)
    return Item(knob, shown(kind, target, current), shown(kind, target, planned) or planned, reason, action,
                raw=restorable(root, kind, target))  # fmt: skip


def _dir_items(root: Root, rel: str, files: list[tuple[str, str, str]], why: str) -> list[Item]:
    """A cpuset directory of the shield and its files, in the order the
    kernel takes them (CPUs and memory nodes before exclusivity)."""
    items = []
    if not root.exists(rel):
        action = Action("cpuset-dir", f"/{rel}", "present", fixes="cpu.isolation", note=f"cpuset {rel}")
        items.append(Item(f"cpuset {rel.rsplit('/', 1)[-1]}", "absent", "present", why, action, raw="absent"))
    for name, planned, reason in files:
        knob = f"{rel.rsplit('/', 1)[-1]} {name}"
        if root.exists(rel):
            item = _file(root, knob, f"{rel}/{name}", planned, reason, "cpu.isolation")
            if item is not None:
                items.append(item)
            continue
        action = Action("sysfs", f"/{rel}/{name}", planned, fixes="cpu.isolation", note=knob)
        items.append(Item(knob, None, planned, reason, action))
    return items


def _shield(root: Root, h: cpuset.Hierarchy, keep: frozenset[int],
            target: frozenset[int]) -> tuple[list[Item], list[str], str | None]:  # fmt: skip
    """The CPU shield's items, its notes, and (v1) the housekeeping
    cpuset's path, where the threads go."""
    t, k = format_cpulist(target), format_cpulist(keep)
    shield_dir = f"{h.mount}/{cpuset.SHIELD}"
    if h.version == 2:
        items = []
        control = f"{h.mount}/cgroup.subtree_control"
        if "cpuset" not in (root.read_line(control) or "").split():
            action = Action("cgroup-controller", f"/{control}#cpuset", "on", fixes="cpu.isolation",
                            note="cpuset controller for the root's children")  # fmt: skip
            items.append(Item("cpuset controller", "off", "on", "lets a child cgroup hold a partition", action,
                              raw="off"))  # fmt: skip
        files = [(h.file("", "cpus").lstrip("/"), t, "the shield's CPUs")]
        if root.exists(f"{h.mount}/cpuset.cpus.isolated"):  # 6.7 on: exclusive CPUs are claimed first
            files.append(("cpuset.cpus.exclusive", t, "claims the CPUs for the shield alone"))
        files.append(("cpuset.cpus.partition", "isolated", "an isolated partition: no load balancing, and no "
                      "task of another cgroup runs there"))  # fmt: skip
        items += _dir_items(root, shield_dir, files, "the shield, an isolated partition (cgroup v2)")
        note = ("the shield is a cgroup v2 isolated partition: the kernel reads back `isolated invalid (reason)` "
                "when it refuses it, and apply reports that reason")  # fmt: skip
        return items, [note], None
    mems = root.read_line(h.file(h.mount, "mems")) or "0"
    hk_dir = f"{h.mount}/{cpuset.HOUSEKEEPING}"
    items = _dir_items(root, hk_dir, [
        (h.file("", "cpus").lstrip("/"), k, "the housekeeping CPUs"),
        (h.file("", "mems").lstrip("/"), mems, "every memory node"),
        (h.file("", "cpu_exclusive").lstrip("/"), "1", "no other set at its level takes its CPUs"),
    ], "the housekeeping cpuset: every movable task and kthread goes here, and their children start here")  # fmt: skip
    items += _dir_items(root, shield_dir, [
        (h.file("", "cpus").lstrip("/"), t, "the shielded CPUs"),
        (h.file("", "mems").lstrip("/"), mems, "every memory node"),
        (h.file("", "cpu_exclusive").lstrip("/"), "1", "no other set at its level takes its CPUs"),
        (h.file("", "sched_load_balance").lstrip("/"), "0", "the scheduler never moves tasks onto or off them"),
    ], "the shield: what runs on the targets is placed there on purpose")  # fmt: skip
    item = _file(root, "root cpuset sched_load_balance", h.file(h.mount, "sched_load_balance"), "0",
                 "one scheduling domain over all CPUs would balance across the shield", "cpu.isolation")  # fmt: skip
    if item is not None:
        items.append(item)
    return items, [], f"/{hk_dir}"


def _tickless(root: Root) -> bool:
    """Whether this kernel can stop the tick (CONFIG_NO_HZ_FULL), or its config could not be read: the plan
    speaks of nohz_full only where it could be had."""
    config, where = read_config(root, read_identity(root).release)
    return not where or config.get("CONFIG_NO_HZ_FULL") == "y"


def _residue(root: Root, target: frozenset[int]) -> list[str]:
    """Per target CPU, what only the boot part quiets."""
    cmdline = parse_cmdline(root.read_line("proc/cmdline") or "")
    out: dict[str, list[int]] = {}  # what a CPU's note says -> the CPUs it says it of, one line for them all
    options = [("nohz_full", "the tick (nohz_full)")] if _tickless(root) else []
    options.append(("rcu_nocbs", "RCU callbacks (rcu_nocbs)"))
    for cpu in sorted(target):
        left = []
        for option, what in options:
            try:
                on = cpu in parse_cpulist(cmdline.get(option) or "")
            except ValueError:
                on = False
            if not on:
                left.append(what)
        isol = (cmdline.get("isolcpus") or "").split(",")
        flags = [w for w in isol if w and not w[0].isdigit()]
        try:
            managed = "managed_irq" in flags and cpu in parse_cpulist(",".join(w for w in isol if w not in flags))
        except ValueError:
            managed = False
        if not managed:
            left.append("managed IRQs (isolcpus=managed_irq)")
        if not left:
            out.setdefault("the boot part is in force too: nohz_full, rcu_nocbs, isolcpus=managed_irq", []).append(cpu)
            continue
        # said of one CPU in words that read as well of many: the CPUs alike are one line, "CPUs 1-383:"
        said = f"the run-time part moves tasks, kthreads, IRQs and workqueues away. {_joined(left)} need the boot part"
        out.setdefault(said, []).append(cpu)
    return [f"{cpus_phrase(cpus)}: {said}" for said, cpus in out.items()]


def _joined(words: list[str]) -> str:
    """ "a, b and c", capitalised."""
    said = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return said[:1].upper() + said[1:]


Wanted = tuple[str, str, str, str, str]  # knob, file, planned value, reason, the audit finding it fixes


def _cpu_and_scheduler(root: Root, target: frozenset[int], profile: str,
                       rt_unthrottled: bool) -> tuple[list[Wanted], list[str]]:  # fmt: skip
    """The governor, turbo, timer migration, RT throttling and the
    preemption model, as each profile wants them, where the node has them."""
    wanted: list[Wanted] = []
    notes: list[str] = []
    for cpu in sorted(target):
        base = f"sys/devices/system/cpu/cpu{cpu}/cpufreq"
        offered = (root.read_line(f"{base}/scaling_available_governors") or "performance").split()
        if root.exists(f"{base}/scaling_governor") and "performance" in offered:
            wanted.append((f"CPU {cpu} governor", f"{base}/scaling_governor", "performance",
                           "the clock does not ramp down between bursts of work", "cpu.governor"))  # fmt: skip
    turbo = [(rel, on_value) for rel, on_value in (("sys/devices/system/cpu/intel_pstate/no_turbo", "1"),
                                                    ("sys/devices/system/cpu/cpufreq/boost", "0"))
             if root.exists(rel)]  # fmt: skip
    if turbo and profile == "latency":
        rel, off = turbo[0]
        wanted.append(("turbo off", rel, off, "one clock rate: turbo's rate moves with the other cores' load and "
                       "the temperature, and so does every time measured", "cpu.turbo"))  # fmt: skip
    elif turbo:
        notes.append("turbo stays on in the throughput profile: faster on average, at a clock that varies with load "
                     "and temperature. The latency profile turns it off")  # fmt: skip
    migration = root.read_line("proc/sys/kernel/timer_migration")
    if migration is not None and profile == "latency":
        wanted.append(
            (
                "timer_migration",
                "proc/sys/kernel/timer_migration",
                "0",
                "each timer fires where it was armed: none arrive on a target from elsewhere",
                "timer.migration",
            )
        )
    elif migration is not None:
        notes.append(f"timer_migration stays {migration} in the throughput profile. 1 lets an idle CPU's timers run "
                     "on a busy one, for fewer wake-ups of idle CPUs. 0 keeps each timer where it was armed, so none "
                     "arrive on a target from elsewhere; the latency profile sets 0")  # fmt: skip
    runtime = root.read_line("proc/sys/kernel/sched_rt_runtime_us")
    if runtime is not None and rt_unthrottled:
        wanted.append(
            (
                "RT throttling off",
                "proc/sys/kernel/sched_rt_runtime_us",
                "-1",
                "a real-time task on a target is never paused for the rest of its period: nothing else "
                "should run there",
                "sched.rt_throttling",
            )
        )
    elif runtime is not None and runtime != "-1":
        said = f"{int(runtime) / 1000:g} ms" if runtime.isdigit() else f"{runtime} µs"  # as the audit says it
        notes.append(f"RT throttling stays at {said} of RT time a period, so a SCHED_FIFO spinner on a target "
                     "is paused each period. --allow-rt-unthrottled lifts it; a runaway RT task can then hang the "
                     "CPU")  # fmt: skip
    models, why = root.read("sys/kernel/debug/sched/preempt")
    if models is None:
        if not root.listdir("sys/kernel/debug"):
            reason = "debugfs is not mounted. `mount -t debugfs none /sys/kernel/debug` mounts it"
        elif not root.exists("sys/kernel/debug/sched/preempt"):
            reason = "the kernel is not PREEMPT_DYNAMIC: its model is built in"
        else:
            reason = f"debugfs refuses it, {why}. The kernel is locked down, see kernel_lockdown(7)"
        notes.append(f"the preemption model stays as it is: {reason}")
    else:
        models = models.strip()
        model = "full" if profile == "latency" else "voluntary"
        if model in models.replace("(", " ").replace(")", " ").split():
            wanted.append(("preemption model", "sys/kernel/debug/sched/preempt", model,
                           "full: a waking task preempts at once (latency); voluntary: fewer switches "
                           "(throughput)", "sched.preempt"))  # fmt: skip
    return wanted, notes


def _irqbalance(root: Root, target: frozenset[int]) -> tuple[list[Item], list[str]]:
    """irqbalance would move the IRQs back onto the targets. Banned from
    them already (IRQBALANCE_BANNED_CPULIST), it may stay; else it is
    stopped while tuned, through systemd, and started by revert. Editing
    its configuration and restarting it would also do, but that file is
    the administrator's: quietcore stops the service and says so."""

    if irqbalance_running(read_tasks(root)) is None:
        return [], []
    t = format_cpulist(target)
    conf = next((c for c in ("etc/default/irqbalance", "etc/sysconfig/irqbalance") if root.exists(c)), None)
    banned: frozenset[int] = frozenset()
    for line in (root.read_text(conf) or "").splitlines() if conf else []:
        key, _, value = line.strip().partition("=")
        if key == "IRQBALANCE_BANNED_CPULIST":
            with contextlib.suppress(ValueError):
                banned = parse_cpulist(value.strip().strip('"'))
    if target <= banned:
        return [Item("irqbalance", f"running, bans {format_cpulist(banned)}", f"running, bans {t}",
                     f"its IRQBALANCE_BANNED_CPULIST in /{conf} keeps it off the targets", None)], []  # fmt: skip
    reason = (f"it would move the IRQs back onto the targets: stopped while tuned (or ban them yourself: "
              f"IRQBALANCE_BANNED_CPULIST={t} in /{conf or 'etc/default/irqbalance'}, then restart it)")  # fmt: skip
    if root.read_line("proc/1/comm") != "systemd":
        return [Item("irqbalance", "running", "stopped", reason, None,
                     refused="it runs outside systemd, so quietcore cannot start it again: stop it, or ban the "
                     "targets as said")], []  # fmt: skip
    action = Action("service-state", "irqbalance.service", "inactive", fixes="irq.irqbalance", note="irqbalance")
    return [Item("irqbalance", "active", "inactive", reason, action, raw="active")], []


def _runtime(root: Root, keep: frozenset[int], target: frozenset[int], profile: str, shield: bool,
             rt_unthrottled: bool, found: list[Device]) -> tuple[list[Item], list[str]]:  # fmt: skip

    mask = format_cpumask(keep)
    items: list[Item] = []
    notes: list[str] = []
    owner = {n: d for d in found for n in d.vectors}  # an IRQ's device, where it is a GPU's or a NIC's
    threads = irq_threads(read_tasks(root), list(owner)) if owner else {}
    for irq in read_irqs(root):
        if irq.requested is None:
            continue
        device = owner.get(irq.number)
        # A device's IRQ goes to a housekeeping CPU near it, where one is (choose keeps a core on each node).
        near = (device.local_cpus or frozenset()) & keep if device else frozenset()
        cpus = near or keep
        knob = f"IRQ {irq.number} ({device.name if device else irq.device})"
        mine = threads.get(irq.number, [])
        with_thread = f", with its thread {', '.join(f'{t.comm} ({t.pid})' for t in mine)}" if mine else ""
        follows = " (the kernel moves a threaded handler with its IRQ)" if mine else ""
        reason = (f"the device's IRQ to a housekeeping CPU near it{with_thread}{follows}" if device and near else
                  f"device IRQ off the targets{with_thread}{follows}")  # fmt: skip
        current = format_cpulist(irq.requested)
        of = partial(Item, device=device.name if device else None, irq=irq.number, threads=len(mine))
        if irq.requested <= cpus:
            items.append(of(knob, current, format_cpulist(cpus), reason, None))
            continue
        action = Action("irq-affinity", f"/proc/irq/{irq.number}/smp_affinity", format_cpumask(cpus),
                        fixes="irq.affinity", note=knob + with_thread)  # fmt: skip
        items.append(of(knob, current, format_cpulist(cpus), reason, action, raw=format_cpumask(irq.requested)))
    for d in found:
        if d.local_cpus is not None and not d.local_cpus & keep:
            notes.append(f"no housekeeping CPU is near {d.name}, whose CPUs are {format_cpulist(d.local_cpus)}. Its "
                         f"IRQs go to {format_cpulist(keep)}, across the interconnect; --housekeeping can keep a core "
                         "of its NUMA node")  # fmt: skip
    followers = {t.pid for group in threads.values() for t in group}
    balancer, balancer_notes = _irqbalance(root, target)
    items += balancer
    notes += balancer_notes
    hierarchy = cpuset.find(root) if shield else None
    housekeeping_dir = None
    if hierarchy is not None:
        shield_items, shield_notes, housekeeping_dir = _shield(root, hierarchy, keep, target)
        items += shield_items
        notes += shield_notes
    movable, bound = task.movable(root)
    me = os.getpid() if root.is_live else None
    for t in movable:
        if t.pid == me:
            continue  # quietcore itself: `tune prove` measures the targets from it
        if t.pid in followers:
            continue  # a device IRQ's thread: it follows its IRQ, planned above as one change
        tid_target = task.target(t.tid)
        if tid_target is None:
            continue
        knob = f"{'kthread' if t.kthread else 'task'} {t.pid}{f' thread {t.tid}' if t.tid != t.pid else ''} ({t.comm})"
        if housekeeping_dir is not None:
            # into the housekeeping cpuset, keeping a pin within the housekeeping CPUs
            pinned = format_cpulist(t.allowed & keep or keep)
            now = cpuset.read_task(tid_target)
            value = f"{housekeeping_dir} {pinned}"
            if now is not None and same("cpuset-task", tid_target, now, value):
                continue
            action = Action("cpuset-task", tid_target, value, fixes="task.placement", note=knob)
            items.append(Item(knob, now, value, "into the housekeeping cpuset", action, raw=now))
            continue
        if t.allowed <= keep:
            continue
        action = Action("task-affinity", tid_target, format_cpulist(keep), fixes="task.placement", note=knob)
        items.append(Item(knob, format_cpulist(t.allowed), format_cpulist(keep), "off the targets", action,
                          raw=format_cpulist(t.allowed)))  # fmt: skip
    tickless = _tickless(root)
    if bound:
        quiets = "isolcpus=domain and nohz_full quiet" if tickless else "isolcpus=domain quiets"
        notes.append(f"{bound} kernel threads are bound to their CPU by the kernel: ksoftirqd/N, kworker/N, "
                     f"migration/N. They stay; the boot part's {quiets} them")  # fmt: skip
    wanted = [
        ("IRQ default affinity", "proc/irq/default_smp_affinity", mask, "IRQs registered from now on",
         "irq.default_affinity"),
        ("workqueue cpumask", f"{WORKQUEUES}/cpumask", mask, "unbound workqueue work off the targets",
         "kthread.placement"),
    ]  # fmt: skip
    for wq in root.listdir(WORKQUEUES):
        if root.exists(f"{WORKQUEUES}/{wq}/cpumask"):
            wanted.append((f"workqueue {wq}", f"{WORKQUEUES}/{wq}/cpumask", mask,
                           f"the {wq} workqueue's work off the targets", "kthread.placement"))  # fmt: skip
    numa = root.read_line("proc/sys/kernel/numa_balancing")
    if numa is not None:
        wanted.append(("numa_balancing", "proc/sys/kernel/numa_balancing", "0",
                       "NUMA hinting faults interrupt the targets' tasks", "mem.numa_balancing"))  # fmt: skip
    thp = root.read_line(THP)
    if profile == "latency" and thp is not None and "[always]" in thp:
        wanted.append(("THP", THP, "madvise", "khugepaged and compaction stalls only for who asks for huge pages",
                       "mem.thp"))  # fmt: skip
    if profile == "latency" and root.exists("dev/cpu_dma_latency"):
        now = pmqos.KIND.read(root) if root.is_live else "none"
        hold = None if now == "0" else Action("pm-qos", pmqos.DEVICE, "0", fixes="cpu.cstates",
                                                note="C-state limit")  # fmt: skip
        items.append(Item("C-state limit (PM QoS)", now, "0", "idle CPUs stay in the shallowest state: no deep "
                          "C-state exit on a wake-up", hold, raw=now))  # fmt: skip
        notes.append("the C-state limit is a PM QoS request, in force only while a process holds "
                     "/dev/cpu_dma_latency open. apply starts a holder that sleeps, its pid file beside the node "
                     "locks, and revert ends it. It costs power on idle CPUs, as idle=poll does for good")  # fmt: skip
    more, more_notes = _cpu_and_scheduler(root, target, profile, rt_unthrottled)
    wanted += more
    notes += more_notes
    for knob, rel, planned, reason, fixes in wanted:
        item = _file(root, knob, rel, planned, reason, fixes)
        if item is not None:
            items.append(item)
    if tickless:
        notes.append("a nohz_full CPU keeps its tick while more than one task is runnable on it: one task per target")
    return items, notes + _residue(root, target)


def make_plan(root: Root, targets: str | None = None, housekeeping: str | None = None,
              profile: str = "throughput", shield: bool = True, rt_unthrottled: bool = False,
              ranks_per_gpu: int | None = None) -> Plan:  # fmt: skip
    if profile not in PROFILES:
        raise UsageError(f"invalid --profile {profile!r} (valid: {', '.join(PROFILES)})")
    topo = read_topology(root)
    if not topo.online:
        raise UsageError(f"no online CPUs under {root}: not a node's root")
    keep, target = choose(topo, targets, housekeeping)
    _cpu0_can_leave(root, target)
    boot, boot_notes = _boot(root, keep, target, profile)
    found = read_devices(root)
    runtime, runtime_notes = _runtime(root, keep, target, profile, shield, rt_unthrottled, found)
    gpus = [d for d in found if d.kind == "gpu"]
    ranks = rank_map(gpus, topo, target, ranks_per_gpu) if ranks_per_gpu else []
    if gpus and not ranks:
        runtime_notes.append(f"{len(gpus)} {'GPU' if len(gpus) == 1 else 'GPUs'} here: `tune plan --ranks-per-gpu N` "
                             "gives each rank the target CPUs near its GPU, and the launcher's line, for Slurm "
                             "--gpu-bind=closest and --cpu-bind")  # fmt: skip
    return Plan(keep, target, profile, boot, runtime, boot_notes + runtime_notes, ranks)


def tuned_profile(plan: Plan, host: str) -> str:
    """The same shielding as a tuned profile on cpu-partitioning, which does
    the boot part and the IRQs, kthreads and workqueues itself; the rest of
    the run-time part as its own sections."""
    targets = format_cpulist(plan.targets)
    lines = [
        f"# Written by `quietcore tune plan --export tuned` on {host}: shield CPUs {targets},",
        f"# housekeeping on {format_cpulist(plan.housekeeping)} ({plan.profile} profile).",
        "[main]",
        f"summary=quietcore: CPUs {targets} shielded",
        "include=cpu-partitioning",
        "",
        "[variables]",
        f"isolated_cores={targets}",
        f"no_balance_cores={targets}",
    ]
    knobs = {i.knob: i for i in plan.runtime if i.action}
    if "numa_balancing" in knobs:
        lines += ["", "[sysctl]", "kernel.numa_balancing=0"]
    if "THP" in knobs:
        lines += ["", "[vm]", "transparent_hugepages=madvise"]
    if "C-state limit (PM QoS)" in knobs:
        lines += ["", "[cpu]", "force_latency=0"]
    return "\n".join(lines) + "\n"


def scripts(plan: Plan) -> tuple[str, str]:
    """A shell script that applies the run-time part and one that puts back
    the values read when the plan was made, in reverse order. An IRQ the
    kernel refuses (a managed one) is reported and the script goes on."""
    cpus = f"# Housekeeping CPUs {format_cpulist(plan.housekeeping)}, targets {format_cpulist(plan.targets)}."
    head = ["#!/bin/sh", "# Written by `quietcore tune plan --export script`.", cpus]
    apply, revert = [*head, "# Applies the run-time part."], [*head, "# Puts back what was there when planned."]
    changes = [i for i in plan.runtime if i.action]
    for item in changes:
        assert item.action is not None
        apply.append(_line(item.action, item.action.value, item.knob))
    for item in reversed(changes):
        assert item.action is not None
        if item.raw is not None:
            revert.append(_line(item.action, item.raw, item.knob))
    return "\n".join(apply) + "\n", "\n".join(revert) + "\n"


def _line(action: Action, value: str, knob: str) -> str:
    return knobs.kind(action.kind).export_line(action.target, value, knob)

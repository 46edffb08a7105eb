"""Who ran on the watched CPUs besides the workload, from a tracefs trace of
every CPU: tasks (and how each came there), IRQs, softirqs and vectors,
IPIs with their sender, work items with where they were queued, timers.

Time is net of nesting, as osnoise counts it: each stretch between two
events on a CPU belongs to the innermost context open there (a timer
callback inside the timer softirq inside an IRQ that interrupted a task),
so nothing is counted twice. The sender of an IPI, the queuer of a work
item and the waker of a task run on another CPU, which is why every CPU is
traced; what each was doing is the context open on its CPU at that moment.

One pass over the trace, in its order (tracefs merges the per-CPU buffers
by time): linear in the events."""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from quietcore.attribution.traceline import LINE
from quietcore.facts.cpulist import parse_cpumask

#: An IRQ as the account names it ("irq 44 (nvidia)"), or its threaded handler ("irq/44-nvidia").
_DEVICE_IRQ = re.compile(r"^(?:irq (\d+) \(.*\)|irq/(\d+)-\S+)$")


def device_name(name: str, owners: dict[int, str]) -> str:
    """A device IRQ's or its thread's name, with the device (`owners`: IRQ number -> "NVIDIA H200 at
    0000:00:06.0"): "irq 44 (nvidia)" is "irq 44 (NVIDIA H200 at 0000:00:06.0)", the task "irq/44-nvidia" is
    "irq/44-nvidia (NVIDIA H200 at 0000:00:06.0)"; any other name as it is."""
    m = _DEVICE_IRQ.match(name)
    if not m:
        return name
    number = int(m.group(1) or m.group(2))
    if number not in owners:
        return name
    return f"irq {number} ({owners[number]})" if m.group(1) else f"{name} ({owners[number]})"


#: The events `intruders` traces, on every CPU (tracefs system/event).
EVENTS = (
    "sched/sched_switch", "sched/sched_waking", "sched/sched_migrate_task", "sched/sched_process_fork",
    "irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit",
    "irq_vectors/local_timer_entry", "irq_vectors/local_timer_exit",
    "irq_vectors/reschedule_entry", "irq_vectors/reschedule_exit",
    "irq_vectors/call_function_entry", "irq_vectors/call_function_exit",
    "irq_vectors/call_function_single_entry", "irq_vectors/call_function_single_exit",
    "irq_vectors/irq_work_entry", "irq_vectors/irq_work_exit",
    "irq_vectors/thermal_apic_entry", "irq_vectors/thermal_apic_exit",
    "irq_vectors/x86_platform_ipi_entry", "irq_vectors/x86_platform_ipi_exit",
    "ipi/ipi_send_cpu", "ipi/ipi_send_cpumask",
    "csd/csd_queue_cpu", "csd/csd_function_entry", "csd/csd_function_exit",
    "workqueue/workqueue_queue_work", "workqueue/workqueue_execute_start", "workqueue/workqueue_execute_end",
    "timer/timer_expire_entry", "timer/timer_expire_exit",
    "timer/hrtimer_expire_entry", "timer/hrtimer_expire_exit",
)  # fmt: skip

_FIELD = re.compile(r"(\w+)[=:]\s*([^\s\],]+)")
_SWITCH = re.compile(
    r"prev_comm=(?P<pc>.*?) prev_pid=(?P<pp>-?\d+) .*?==> next_comm=(?P<nc>.*?) next_pid=(?P<np>-?\d+)"
)
_COMM_PID = re.compile(r"comm=(?P<comm>.*?) pid=(?P<pid>\d+)")
_FORK = re.compile(r"pid=(?P<parent>\d+) child_comm=.*? child_pid=(?P<child>\d+)")
_WORK = re.compile(r"work struct[= ](?P<ptr>\w+):? function[= ]?(?P<fn>\S+)")
SELF = "quietcore itself"
#: Where `--explain-above` asks the kernel for a stack (the stacktrace
#: trigger): as each context on a measured CPU begins, and as something
#: wakes a task for one (the waker's stack).
STACK_AT = (
    "irq/irq_handler_entry", "irq/softirq_entry", "irq_vectors/local_timer_entry",
    "irq_vectors/call_function_single_entry", "irq_vectors/reschedule_entry", "irq_vectors/irq_work_entry",
    "timer/timer_expire_entry", "timer/hrtimer_expire_entry", "workqueue/workqueue_execute_start",
    "csd/csd_function_entry",
)  # fmt: skip
_STACK = re.compile(r"^\s*.*?-\d+\s+\[(?P<cpu>\d+)\].*?:\s+<stack trace>\s*$")
_FRAME = re.compile(r"^\s*=> (?P<frame>\S+)")
#: The tracer's own frames at the top of every stack
_TRACER_FRAMES = ("trace_event_raw_event", "__traceiter", "__ftrace_trace_stack", "event_triggers", "trace_")


def stack_triggers(cpus: frozenset[int]) -> dict[str, str]:
    """The stacktrace triggers for `cpus`: contexts beginning there, and
    wake-ups aimed there."""
    on = " || ".join(f"CPU == {c}" for c in sorted(cpus))
    aimed = " || ".join(f"target_cpu == {c}" for c in sorted(cpus))
    return {**{event: f"stacktrace if {on}" for event in STACK_AT}, "sched/sched_waking": f"stacktrace if {aimed}"}


#: Per-CPU kernel threads: bound to their CPU, so no affinity or shield moves them.
PER_CPU_KTHREAD = re.compile(r"^(ksoftirqd|migration|cpuhp|rcuc|idle_inject|watchdog|irq_work)/\d+$|^kworker/\d+:")


def _symbol(text: str) -> str:
    """`flush_tlb_func+0x0/0x1b0` -> `flush_tlb_func`."""
    return text.split("+", 1)[0]


#: An IPI's targets as the kernel prints them (`__get_cpumask`, `%*pb`): 32-bit
#: words in hex, the highest first, comma-separated ("00000000,00000002" is
#: CPU 1), which the fields' pattern would cut at the first comma.
_CPUMASK = re.compile(r"\bcpumask=([0-9a-fA-F]+(?:,[0-9a-fA-F]{8})*)(?=\s|$)")


def _cpumask(rest: str) -> list[int]:
    """The CPUs an `ipi_send_cpumask` record names, none where it names none readable."""
    m = _CPUMASK.search(rest)
    try:
        return sorted(parse_cpumask(m[1])) if m is not None else []
    except ValueError:
        return []


#: How a stretch came to a watched CPU (Came.how): a task woken, or moved from another CPU, or there already
#: (its affinity includes the CPU); a work item queued; an IPI sent; a sample that saw it there (no trace).
WOKEN, MOVED, HERE, QUEUED, SENT, SAMPLED = "woken", "moved", "here", "queued", "sent", "sampled"
#: A way it came stored as a sentence, before ways were data: `by` holds the sentence, said as it is.
SAID = "said"


@dataclass(frozen=True)
class Came:
    """How a stretch came to a watched CPU, as data (report.kinds.intruders says it): who woke, queued or sent
    it (`by`: a context, "python3 (705)", "the workload", "idle"), on which CPU, inside which work item, from
    which call site, and the CPU a woken task was moved from."""

    how: str
    by: str = ""
    cpu: int | None = None
    work: str = ""
    site: str = ""
    moved: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in ("", None)}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Came:
        cpu, moved = d.get("cpu"), d.get("moved")
        return Came(str(d.get("how") or SAID), str(d.get("by") or ""), int(cpu) if isinstance(cpu, int) else None,
                    str(d.get("work") or ""), str(d.get("site") or ""),
                    int(moved) if isinstance(moved, int) else None)  # fmt: skip


def came_json(came: Counter[Came], most: int) -> list[dict[str, Any]]:
    """The `most` commonest ways a source came, each with its count, as stored."""
    return [{**c.to_json(), "n": n} for c, n in came.most_common(most)]


def came_of(stored: Any) -> list[tuple[Came, int]]:
    """The ways a stored source came, with their counts; a run stored before ways were data kept sentences
    ({"woken by X on CPU 4": 3}), each read as one way, said as it was."""
    if isinstance(stored, Mapping):
        return [(Came(SAID, str(text)), int(n)) for text, n in stored.items()]
    out = []
    for d in stored or ():
        if isinstance(d, Mapping):
            out.append((Came.from_json(d), int(d.get("n") or 1)))
    return out


@dataclass
class Use:
    """A source's share of one CPU: how many times and how long (net)."""

    kind: str  # task, irq, softirq, vector, ipi, work, timer
    name: str
    count: int = 0
    ns: float = 0.0
    longest_ns: float = 0.0
    pid: int | None = None
    came: Counter[Came] = field(default_factory=Counter)  # how it came, each way counted
    workload_sent: int = 0  # IPIs whose sender was the workload itself

    def close(self, ns: float) -> None:
        """One stretch of `ns` ended; its time was already charged as it ran."""
        self.count += 1
        self.longest_ns = max(self.longest_ns, ns)


@dataclass
class Episode:
    """One stretch of a source on a watched CPU, from its start to its end
    (wall time: what it interrupted or displaced), with how it came."""

    start: float
    end: float
    kind: str
    name: str
    pid: int | None = None
    came: Counter[Came] = field(default_factory=Counter)
    stack: list[str] = field(default_factory=list)  # the kernel's, as it began or was woken, innermost first


@dataclass
class CpuIntruders:
    cpu: int
    traced_ns: float = 0.0
    events: int = 0
    workload_ns: float = 0.0
    idle_ns: float = 0.0
    uses: dict[tuple[str, str, int | None], Use] = field(default_factory=dict)
    episodes: list[Episode] = field(default_factory=list)  # kept when asked for (account's episodes=True)

    def use(self, kind: str, name: str, pid: int | None = None) -> Use:
        key = (kind, name, pid)
        if key not in self.uses:
            self.uses[key] = Use(kind, name, pid=pid)
        return self.uses[key]

    @property
    def intruded_ns(self) -> float:
        return sum(u.ns for u in self.uses.values())

    def ranked(self, kind: str | None = None) -> list[Use]:
        return sorted((u for u in self.uses.values() if kind is None or u.kind == kind), key=lambda u: -u.ns)


@dataclass
class _Ctx:
    kind: str
    name: str
    start: float = 0.0
    ns: float = 0.0
    came: Came | None = None
    csd: str | None = None
    stack: list[str] = field(default_factory=list)


@dataclass
class _Cpu:
    last: float | None = None
    pid: int = -1
    comm: str = ""
    stack: list[_Ctx] = field(default_factory=list)
    slice_ns: float = 0.0
    slice_start: float = 0.0
    slice_came: Came | None = None
    slice_stack: list[str] = field(default_factory=list)
    last_push: _Ctx | None = None  # the context the last event here began: a stack that follows is its
    last_woken: int | None = None  # the task the last event here woke


SLACK_NS = 50_000.0  # a sender's record this long after the IPI arrived is still its sender


class _Pairs:
    """Senders matched to the IPIs they sent, whichever the trace shows
    first: tracefs orders events by time, and a sender's tracepoint can
    fire after the IPI has already arrived on the other CPU. `coalesce`:
    one arrival takes every send before it (reschedule IPIs)."""

    def __init__(self, coalesce: bool) -> None:
        self.coalesce = coalesce
        self.sent: dict[Any, deque[tuple[float, Came, bool]]] = {}
        self.arrived: dict[Any, deque[tuple[float, Use, Episode | None]]] = {}

    def send(self, key: Any, ts: float, came: Came, inside: bool) -> None:
        waiting = self.arrived.get(key)
        while waiting and ts - waiting[0][0] > SLACK_NS:
            waiting.popleft()
        if waiting:
            _, use, episode = waiting[0] if self.coalesce else waiting.popleft()
            _credit(use, episode, came, inside)
            return
        self.sent.setdefault(key, deque()).append((ts, came, inside))

    def arrive(self, key: Any, ts: float, use: Use, episode: Episode | None) -> None:
        queue = self.sent.get(key)
        taken = (list(queue) if self.coalesce else [queue.popleft()]) if queue else []
        for _, came, inside in taken:
            _credit(use, episode, came, inside)
        if self.coalesce:
            if queue:
                queue.clear()
            self.arrived[key] = deque([(ts, use, episode)])  # a send recorded late joins the latest arrival
        elif not taken:
            self.arrived.setdefault(key, deque()).append((ts, use, episode))


def _credit(use: Use, episode: Episode | None, came: Came, inside: bool) -> None:
    use.came[came] += 1
    use.workload_sent += inside
    if episode is not None:
        episode.came[came] += 1


@dataclass
class Slot:
    """What ran on the watched CPUs in one interval (a benchmark's iteration):
    the intruders by name (a task by its name, so one started anew in each
    fork is one), and the workload's own threads by name (a JVM's JIT and GC)."""

    start: float
    end: float
    intruders: dict[str, float] = field(default_factory=dict)  # ns
    threads: dict[str, float] = field(default_factory=dict)
    cpus: dict[int, float] = field(default_factory=dict)  # where the workload ran in it, ns a CPU


class Slots:
    """Intervals of time, sorted and not overlapping, to charge stretches to."""

    def __init__(self, intervals: Iterable[tuple[float, float]]) -> None:
        self.slots = [Slot(a, b) for a, b in sorted(intervals)]
        self.starts = [s.start for s in self.slots]

    def charge(self, start: float, end: float, name: str, workload: bool, cpu: int = -1) -> None:
        k = max(bisect.bisect_right(self.starts, start) - 1, 0)
        while k < len(self.slots) and self.slots[k].start < end:
            slot = self.slots[k]
            overlap = min(end, slot.end) - max(start, slot.start)
            if overlap > 0:
                into = slot.threads if workload else slot.intruders
                into[name] = into.get(name, 0.0) + overlap
                if workload:
                    slot.cpus[cpu] = slot.cpus.get(cpu, 0.0) + overlap
            k += 1


@dataclass
class Trace:
    """What one pass over a trace found: per watched CPU, its intruders;
    the span of the trace, and the workload's processes as the trace saw
    them fork."""

    cpus: dict[int, CpuIntruders]
    workload: set[int]
    lines: int = 0
    migrations: int = 0  # of the workload's tasks, between CPUs
    mended: int = 0  # switches the trace did not hold, inferred from the next line
    slots: list[Slot] = field(default_factory=list)  # account's `intervals`, each with what ran in it

    def to_json(self) -> dict[str, Any]:
        return {"cpus": [cpu_json(c) for c in self.cpus.values()], "events": self.lines,
                "workload_migrations": self.migrations, "mended_switches": self.mended}  # fmt: skip

    def name_devices(self, owners: dict[int, str]) -> None:
        """Name each device IRQ and its threaded handler by the device (`owners`: IRQ number -> "NVIDIA H200
        at 0000:00:06.0"): "irq 44 (nvidia)" becomes "irq 44 (NVIDIA H200 at 0000:00:06.0)", the task
        "irq/44-nvidia" "irq/44-nvidia (NVIDIA H200 at 0000:00:06.0)", wherever the account holds a name."""
        if not owners:
            return

        def named(name: str) -> str:
            return device_name(name, owners)

        for cpu in self.cpus.values():
            cpu.uses = {(k, named(n), p): replace(u, name=named(u.name)) for (k, n, p), u in cpu.uses.items()}
            for e in cpu.episodes:
                e.name = named(e.name)
        for slot in self.slots:
            slot.intruders = {named(n): ns for n, ns in slot.intruders.items()}


def account(
    lines: Iterable[str],
    watched: frozenset[int],
    to_ns: Callable[[str], float],
    workload: Iterable[int] = (),
    window: tuple[float, float] | None = None,
    own: Iterable[int] = (),
    spawners: Iterable[int] = (),
    episodes: bool = False,
    intervals: Iterable[tuple[float, float]] = (),
) -> Trace:
    """One pass over tracefs text. `workload`: the pids whose process tree
    is the workload (its forks join it); `window` (ns): the time counted,
    from the first mark to the last (events outside it still say what was
    running); `own`: quietcore's threads, named as itself;
    `spawners`: pids whose children are the workload, themselves not (an
    experiment's runner, which starts each run's workload); `episodes`: keep
    every stretch of every source on the watched CPUs, in time order;
    `intervals` (ns, sorted, apart): what ran in each, intruders and the
    workload's threads by name (Trace.slots)."""
    one = _Pass(watched, workload, window, own, spawners, episodes, intervals)
    for line in lines:
        one.line(line, to_ns)
    return one.end()


@dataclass
class _Event:
    """One line of the trace, parsed: its CPU, time (ns), event name and fields' text."""

    cpu: int
    ts: float
    event: str
    rest: str


class _Pass:
    """account's one pass: the state of every CPU, and a handler a kind of event (HANDLERS)."""

    def __init__(self, watched: frozenset[int], workload: Iterable[int], window: tuple[float, float] | None,
                 own: Iterable[int], spawners: Iterable[int], episodes: bool,
                 intervals: Iterable[tuple[float, float]]) -> None:  # fmt: skip
        self.watched = watched
        self.mine = set(workload)
        self.parents = set(spawners)
        self.ours = set(own)
        self.slots = Slots(intervals)
        self.episodes = episodes
        self.window = window
        self.out = Trace({c: CpuIntruders(c) for c in sorted(watched)}, self.mine, slots=self.slots.slots)
        self.lo, self.hi = window if window is not None else (-float("inf"), float("inf"))
        self.state: dict[int, _Cpu] = {}
        self.woken: dict[int, Came] = {}  # pid -> who woke it
        self.moved: dict[int, int] = {}  # pid -> the CPU it was migrated from
        self.queued: dict[str, Came] = {}  # work struct -> who queued it
        self.calls, self.resched = _Pairs(coalesce=False), _Pairs(coalesce=True)
        self.stashed: dict[int, list[_Ctx]] = {}  # a task's open work item while it sleeps
        self.comm_of: dict[int, str] = {}  # pid -> the name switches and wake-ups gave it
        self.wake_stack: dict[int, list[str]] = {}  # pid -> the stack of whatever woke it
        self.frames: list[str] | None = None  # a <stack trace> being read
        self.frames_cpu = -1
        self.seen = 0

    # -- what runs where ---------------------------------------------------------------------------------

    def who(self, cpu: int, st: _Cpu, how: str, site: str = "") -> tuple[Came, bool]:
        """What runs on `cpu` now (the innermost context, or the task), as the one that woke, queued or sent
        something `how`; and whether it is the workload."""
        for ctx in reversed(st.stack):
            if ctx.kind != "work":
                return Came(how, ctx.name, cpu, site=site), False
        inside = st.pid in self.mine
        label = "the workload" if inside else "idle" if st.pid == 0 else f"{st.comm} ({st.pid})"
        work = next((c.name for c in reversed(st.stack) if c.kind == "work"), "")
        return Came(how, label, cpu, work, site), inside

    def intruder(self, pid: int) -> bool:
        return pid > 0 and pid not in self.mine

    def close(self, cpu: int, ctx: _Ctx, ts: float) -> tuple[Use, Episode | None]:
        use = self.out.cpus[cpu].use(ctx.kind, ctx.name)
        use.close(ctx.ns)
        if ctx.came:
            use.came[ctx.came] += 1
        episode = None
        if self.episodes:
            came = Counter([ctx.came] if ctx.came else [])
            episode = Episode(ctx.start, ts, ctx.kind, ctx.name, came=came, stack=ctx.stack)
            self.out.cpus[cpu].episodes.append(episode)
        return use, episode

    def pop(self, cpu: int, st: _Cpu, kind: str, ts: float) -> tuple[_Ctx, Use | None, Episode | None] | None:
        for i in range(len(st.stack) - 1, -1, -1):
            if st.stack[i].kind == kind:
                ctx, lost = st.stack[i], st.stack[i + 1 :]
                del st.stack[i:]  # an exit lost inside it closes with it
                if cpu not in self.watched:
                    return ctx, None, None
                for inner in lost:
                    self.close(cpu, inner, ts)
                return (ctx, *self.close(cpu, ctx, ts))
        return None

    @staticmethod
    def push(st: _Cpu, ts: float, ctx: _Ctx) -> None:
        ctx.start = ts
        st.stack.append(ctx)
        st.last_push = ctx

    def slice_ends(self, cpu: int, st: _Cpu, ts: float) -> None:
        """The task on `cpu` leaves it at `ts`."""
        if cpu in self.watched and self.intruder(st.pid):
            use = self.out.cpus[cpu].use("task", st.comm, st.pid)
            use.longest_ns = max(use.longest_ns, st.slice_ns)
            if self.episodes and st.slice_came:
                came = Counter([st.slice_came])
                episode = Episode(st.slice_start, ts, "task", st.comm, st.pid, came, st.slice_stack)
                self.out.cpus[cpu].episodes.append(episode)

    def switch_in(self, cpu: int, st: _Cpu, nxt: int, comm: str, ts: float) -> None:
        self.slice_ends(cpu, st, ts)
        comm = SELF if nxt in self.ours else comm
        work = [c for c in st.stack if c.kind == "work"]
        if cpu in self.watched:  # an interrupt open across a switch: its exit was lost
            for ctx in reversed(st.stack):
                if ctx.kind != "work":
                    self.close(cpu, ctx, ts)
        if work:
            self.stashed[st.pid] = work
        st.stack = self.stashed.pop(nxt, [])
        st.pid, st.comm, st.slice_ns, st.slice_start, st.slice_came = nxt, comm, 0.0, ts, None
        st.slice_stack = self.wake_stack.pop(nxt, [])
        how = self.woken.pop(nxt, None)
        origin = self.moved.pop(nxt, None)
        if cpu in self.watched and self.intruder(nxt) and self.lo <= ts <= self.hi:
            if origin is not None and origin != cpu:
                how = replace(how, moved=origin) if how else Came(MOVED, moved=origin)
            st.slice_came = how or Came(HERE)
            use = self.out.cpus[cpu].use("task", comm, nxt)
            use.count += 1
            use.came[st.slice_came] += 1

    # -- the pass ----------------------------------------------------------------------------------------

    def line(self, line: str, to_ns: Callable[[str], float]) -> None:
        if self.frames is not None:
            frame = _FRAME.match(line)
            if frame:
                self.frames.append(frame["frame"].split("+", 1)[0])
                return
            self.stack_done()
            self.frames = None
        m = LINE.match(line)
        if not m:
            k = _STACK.match(line)
            if k:
                self.frames, self.frames_cpu = [], int(k["cpu"])
            return
        self.seen += 1
        e = _Event(int(m["cpu"]), to_ns(m["ts"]), m["event"], m["rest"])
        st = self.state.get(e.cpu)
        if st is None:
            # What ran before the first event here: the task the event names (for a switch, the one switched out).
            s0 = _SWITCH.search(e.rest) if e.event == "sched_switch" else None
            st = self.state[e.cpu] = _Cpu(last=self.lo if self.window else None,
                                          pid=int(s0["pp"]) if s0 else int(m["pid"]),
                                          comm=s0["pc"] if s0 else m["comm"].strip())  # fmt: skip
            st.comm = SELF if st.pid in self.ours else st.comm
        s = _SWITCH.search(e.rest) if e.event == "sched_switch" else None
        if e.event == "sched_switch" and not s:
            return
        now_pid, now_comm = (int(s["pp"]), s["pc"]) if s else (int(m["pid"]), m["comm"].strip())
        if now_comm == "<...>":  # tracefs's comm cache missed it: the name a switch or a wake-up gave
            now_comm = st.comm if now_pid == st.pid else self.comm_of.get(now_pid, now_comm)
        if now_pid != st.pid and not any(c.kind != "work" for c in st.stack):
            # Every line names the task current on its CPU. A switch the kernel did not record (on this VM,
            # none from idle on CPU 1) happened at the last event here: a task leaves idle as soon as the
            # interrupt that woke it returns.
            self.out.mended += 1
            self.switch_in(e.cpu, st, now_pid, now_comm, st.last if st.last is not None else e.ts)
        if e.cpu in self.watched:
            self.out.cpus[e.cpu].events += 1
            _charge(self.out.cpus[e.cpu], st, max(st.last if st.last is not None else self.lo, self.lo),
                    min(e.ts, self.hi), self.mine, self.slots)  # fmt: skip
        st.last = e.ts
        st.last_push, st.last_woken = None, None
        if s is not None:
            self.comm_of[int(s["np"])] = s["nc"]
            self.switch_in(e.cpu, st, int(s["np"]), s["nc"], e.ts)
            return
        handler = HANDLERS.get(e.event)
        if handler is not None:
            handler(self, e, st)

    def stack_done(self) -> None:
        """A stack belongs to what the last event on its CPU began or woke."""
        st = self.state.get(self.frames_cpu)
        if st is None or not self.frames:
            return
        kept = [f for f in self.frames if not f.startswith(_TRACER_FRAMES)]
        if st.last_push is not None:
            st.last_push.stack = kept
        elif st.last_woken is not None:
            self.wake_stack[st.last_woken] = kept

    def end(self) -> Trace:
        if self.frames is not None:
            self.stack_done()
        out = self.out
        if self.window is not None:
            for watched_cpu in out.cpus.values():
                watched_cpu.traced_ns = self.hi - self.lo  # a CPU without one event was traced too
        for cpu, st in self.state.items():
            if cpu in self.watched and st.last is not None:
                end = self.hi if self.window is not None else st.last
                if self.window is not None:
                    _charge(out.cpus[cpu], st, max(st.last, self.lo), self.hi, self.mine, self.slots)
                for ctx in reversed(st.stack):  # still open when the trace ended: counted as far as it went
                    self.close(cpu, ctx, end)
                self.slice_ends(cpu, st, end)
        out.lines = self.seen
        return out

    # -- a handler an event ------------------------------------------------------------------------------

    def waking(self, e: _Event, st: _Cpu) -> None:
        c = _COMM_PID.search(e.rest)
        if c:
            self.comm_of[int(c["pid"])] = c["comm"]
            self.woken[int(c["pid"])] = self.who(e.cpu, st, WOKEN)[0]
            st.last_woken = int(c["pid"])

    def migrated(self, e: _Event, st: _Cpu) -> None:
        c = _COMM_PID.search(e.rest)
        f = dict(_FIELD.findall(e.rest))
        if c and f.get("orig_cpu", "").isdigit():
            pid = int(c["pid"])
            self.moved[pid] = int(f["orig_cpu"])
            if pid in self.mine and self.lo <= e.ts <= self.hi:
                self.out.migrations += 1

    def forked(self, e: _Event, st: _Cpu) -> None:
        k = _FORK.search(e.rest)
        if k and (int(k["parent"]) in self.mine or int(k["parent"]) in self.parents):
            self.mine.add(int(k["child"]))

    def irq_entry(self, e: _Event, st: _Cpu) -> None:
        f = dict(_FIELD.findall(e.rest))
        self.push(st, e.ts, _Ctx("irq", f"irq {f.get('irq', '?')} ({f.get('name', '?')})"))

    def softirq_entry(self, e: _Event, st: _Cpu) -> None:
        f = dict(_FIELD.findall(e.rest))
        self.push(st, e.ts, _Ctx("softirq", f"softirq {f.get('action', '?')}"))

    def timer_entry(self, e: _Event, st: _Cpu) -> None:
        f = dict(_FIELD.findall(e.rest))
        self.push(st, e.ts, _Ctx("timer", _symbol(f.get("function", "?"))))

    def work_queued(self, e: _Event, st: _Cpu) -> None:
        w = _WORK.search(e.rest)
        if w:
            self.queued[w["ptr"]] = self.who(e.cpu, st, QUEUED)[0]

    def work_start(self, e: _Event, st: _Cpu) -> None:
        w = _WORK.search(e.rest)
        if w:
            self.push(st, e.ts, _Ctx("work", _symbol(w["fn"]), came=self.queued.pop(w["ptr"], None)))

    def call_queued(self, e: _Event, st: _Cpu) -> None:
        f = dict(_FIELD.findall(e.rest))
        sender, inside = self.who(e.cpu, st, SENT, _symbol(f.get("callsite", "?")))
        target = int(f["cpu"]) if f.get("cpu", "").isdigit() else -1
        if target in self.watched and target != e.cpu:
            self.calls.send((f.get("csd"), target), e.ts, sender, inside)

    def call_entry(self, e: _Event, st: _Cpu) -> None:
        f = dict(_FIELD.findall(e.rest))
        if f.get("csd", "").strip("0"):  # csd 0: the sender running the function itself, not an IPI
            self.push(st, e.ts, _Ctx("ipi", _symbol(f.get("func", "?")), csd=f["csd"]))

    def call_exit(self, e: _Event, st: _Cpu) -> None:
        f = dict(_FIELD.findall(e.rest))
        if f.get("csd", "").strip("0"):
            done = self.pop(e.cpu, st, "ipi", e.ts)
            if done is not None and done[1] is not None:
                self.calls.arrive((done[0].csd, e.cpu), e.ts, done[1], done[2])

    def ipi_sent(self, e: _Event, st: _Cpu) -> None:
        f = dict(_FIELD.findall(e.rest))
        if f.get("callback", "") not in ("0x0", "0"):
            return  # a function call: csd_queue_cpu names it and its csd
        targets = [int(f["cpu"])] if f.get("cpu", "").isdigit() else _cpumask(e.rest)
        sender, inside = self.who(e.cpu, st, SENT, _symbol(f.get("callsite", "?")))
        for target in targets:
            if target in self.watched and target != e.cpu:
                self.resched.send(target, e.ts, sender, inside)

    def vector_entry(self, e: _Event, st: _Cpu) -> None:
        self.push(st, e.ts, _Ctx("vector", e.event[: -len("_entry")]))

    def vector_exit(self, e: _Event, st: _Cpu) -> None:
        done = self.pop(e.cpu, st, "vector", e.ts)
        if done is not None and done[1] is not None and done[0].name == "reschedule":
            self.resched.arrive(e.cpu, e.ts, done[1], done[2])


def _exit(kind: str) -> Callable[[_Pass, _Event, _Cpu], None]:
    """The handler of a context's exit: it closes the innermost open context of its kind."""

    def handler(one: _Pass, e: _Event, st: _Cpu) -> None:
        one.pop(e.cpu, st, kind, e.ts)

    return handler


def _charge(c: CpuIntruders, st: _Cpu, start: float, end: float, mine: set[int], slots: Slots | None = None) -> None:
    """The stretch [start, end] belongs to the innermost open context, and
    is charged to its source at once, on this CPU: what is charged is exactly
    the window, whether the context ends in the trace, here or elsewhere (a
    work item whose worker slept and woke on another CPU)."""
    dt = end - start
    if dt <= 0:
        return
    if st.stack:
        ctx = st.stack[-1]
        ctx.ns += dt
        c.use(ctx.kind, ctx.name).ns += dt
        if slots is not None and slots.slots:
            slots.charge(start, end, ctx.name, workload=False)
    elif st.pid == 0:
        c.idle_ns += dt
    elif st.pid in mine:
        c.workload_ns += dt
        if slots is not None and slots.slots:
            slots.charge(start, end, st.comm, workload=True, cpu=c.cpu)
    else:
        c.use("task", st.comm, st.pid).ns += dt
        st.slice_ns += dt
        if slots is not None and slots.slots:
            slots.charge(start, end, st.comm, workload=False)


_VECTORS = frozenset(e.split("/", 1)[1] for e in EVENTS if e.startswith("irq_vectors/") and e.endswith("_entry"))
_VECTOR_EXITS = frozenset(e.removesuffix("_entry") + "_exit" for e in _VECTORS)

#: What the pass does on each event (sched_switch aside: every line's bookkeeping leads to it).
HANDLERS: dict[str, Callable[[_Pass, _Event, _Cpu], None]] = {
    "sched_waking": _Pass.waking, "sched_migrate_task": _Pass.migrated, "sched_process_fork": _Pass.forked,
    "irq_handler_entry": _Pass.irq_entry, "irq_handler_exit": _exit("irq"),
    "softirq_entry": _Pass.softirq_entry, "softirq_exit": _exit("softirq"),
    "timer_expire_entry": _Pass.timer_entry, "hrtimer_expire_entry": _Pass.timer_entry,
    "timer_expire_exit": _exit("timer"), "hrtimer_expire_exit": _exit("timer"),
    "workqueue_queue_work": _Pass.work_queued, "workqueue_execute_start": _Pass.work_start,
    "workqueue_execute_end": _exit("work"),
    "csd_queue_cpu": _Pass.call_queued, "csd_function_entry": _Pass.call_entry, "csd_function_exit": _Pass.call_exit,
    "ipi_send_cpu": _Pass.ipi_sent, "ipi_send_cpumask": _Pass.ipi_sent,
    **{v: _Pass.vector_entry for v in _VECTORS}, **{v: _Pass.vector_exit for v in _VECTOR_EXITS},
}  # fmt: skip


def cpu_json(c: CpuIntruders) -> dict[str, Any]:
    return {
        "cpu": c.cpu,
        "traced_ns": c.traced_ns,
        "events": c.events,
        "workload_ns": c.workload_ns,
        "idle_ns": c.idle_ns,
        "intruded_ns": c.intruded_ns,
        "sources": [
            {"kind": u.kind, "name": u.name, "pid": u.pid, "count": u.count, "ns": u.ns, "longest_ns": u.longest_ns,
             "came": came_json(u.came, 5), "workload_sent": u.workload_sent}
            for u in c.ranked()
        ],
    }  # fmt: skip

"""The intruders' accounting over tracefs text: time net of nesting, each
source with how it came (waker, queuer, IPI sender, in either order of
their records), the workload's forks, the window, the remedies.

tests/fixtures/traces/intruders-cpu1.txt is written in this kernel's trace
format (lines as `quietcore intruders` reads them on 6.18), with times
chosen so that every figure below can be checked by hand."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from rich.table import Table

from quietcore.attribution import tracer
from quietcore.attribution.explain import explain_gaps
from quietcore.attribution.intruders import Came, Trace, Use, account
from quietcore.attribution.remedy import remedy
from quietcore.report.came import words
from quietcore.report.explained import items

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "intruders-cpu1.txt"
T0 = 1000e9  # ns


def us(x: float) -> float:
    return x * 1000.0


def to_ns(ts: str) -> float:
    return float(ts) * 1e9


@pytest.fixture(scope="module")
def found() -> Trace:
    return account(TRACE.read_text().splitlines(), frozenset({1}), to_ns, workload=(100,), window=(T0, T0 + us(1000)))


def by_name(found: Trace) -> dict[str, Use]:
    return {u.name: u for u in found.cpus[1].uses.values()}


def said(came: Counter[Came]) -> dict[str, int]:
    """How a source came, each way in its words."""
    return {words(c): n for c, n in came.items()}


def test_every_source_is_timed_net_of_what_interrupted_it(found: Trace) -> None:
    uses = by_name(found)
    # The intruder ran 200-500 µs, less the 10 µs IRQ inside its slice.
    assert uses["intruder"].ns == pytest.approx(us(290)) and uses["intruder"].pid == 300
    assert uses["intruder"].count == 1 and uses["intruder"].longest_ns == pytest.approx(us(290))
    assert uses["irq 24 (virtio0-input.0)"].ns == pytest.approx(us(10))
    # The tick's vector less its hrtimer callback; the timer softirq less its timer.
    assert uses["local_timer"].ns == pytest.approx(us(3)) and uses["tick_nohz_handler"].ns == pytest.approx(us(2))
    assert uses["softirq TIMER"].ns == pytest.approx(us(2)) and uses["process_timeout"].ns == pytest.approx(us(2))
    assert uses["call_function_single"].ns == pytest.approx(us(2)) and uses["flush_tlb_func"].ns == pytest.approx(us(4))
    # The kworker's slice less the work item it ran.
    assert uses["kworker/1:1"].ns == pytest.approx(us(20)) and uses["vmstat_update"].ns == pytest.approx(us(10))
    cpu = found.cpus[1]
    # Nothing counted twice, nothing lost: the window is the workload, idle and the intruders.
    assert cpu.traced_ns == pytest.approx(us(1000)) and cpu.idle_ns == pytest.approx(us(20))
    assert cpu.workload_ns + cpu.idle_ns + cpu.intruded_ns == pytest.approx(us(1000))


def test_each_source_says_how_it_came(found: Trace) -> None:
    uses = by_name(found)
    assert said(uses["intruder"].came) == {"woken by stress (200) on CPU 0": 1}
    assert said(uses["vmstat_update"].came) == {"queued by stress (200) on CPU 0": 1}
    assert said(uses["reschedule"].came) == {"sent by stress (200) on CPU 0 from ttwu_queue_wakelist": 1}
    # The sender's csd_queue_cpu is recorded after the IPI arrived: it is still its sender.
    tlb = uses["flush_tlb_func"]
    assert said(tlb.came) == {"sent by the workload on CPU 0 from on_each_cpu_cond_mask": 1} and tlb.workload_sent == 1
    assert said(uses["kworker/1:1"].came) == {"already here: its affinity includes this CPU": 1}


def test_the_workloads_forks_are_the_workload(found: Trace) -> None:
    assert found.workload == {100, 101}
    assert not any(u.pid in (100, 101) for u in found.cpus[1].uses.values())


def test_remedies_name_the_finding_or_say_nothing_fixes_it(found: Trace) -> None:
    uses = by_name(found)
    assert remedy(uses["irq 24 (virtio0-input.0)"]).finding == "irq.affinity"
    assert remedy(uses["intruder"]).finding == "task.placement"
    assert "--cpus 1" in remedy(uses["intruder"]).line("1")
    assert remedy(uses["local_timer"]).finding == "cpu.nohz_full"
    own = remedy(uses["flush_tlb_func"])
    assert own.finding is None and "the workload's own munmap" in own.text and "nothing isolation can fix" in own.text
    assert remedy(uses["kworker/1:1"]).finding == "cpu.nohz_full"  # a per-CPU kworker cannot be moved


def test_a_sender_recorded_first_and_a_window_that_cuts_a_slice() -> None:
    lines = [
        "  stress-200 [000] ...1. 1000.000100: csd_queue_cpu: cpu=1 callsite=smp_call_function_many_cond+0x1/0x2 "
        "func=do_sync_core csd=00000000aaaa0002",
        "  work-100   [001] d.h1. 1000.000150: csd_function_entry: func=do_sync_core, csd=00000000aaaa0002",
        "  work-100   [001] d.h1. 1000.000151: csd_function_exit: func=do_sync_core, csd=00000000aaaa0002",
        "  work-100   [001] d..2. 1000.000200: sched_switch: prev_comm=work prev_pid=100 prev_prio=120 prev_state=R "
        "==> next_comm=other next_pid=400 next_prio=120",
        "  other-400  [001] d..2. 1000.000900: sched_switch: prev_comm=other prev_pid=400 prev_prio=120 prev_state=S "
        "==> next_comm=work next_pid=100 next_prio=120",
    ]
    found = account(lines, frozenset({1}), to_ns, workload=(100,), window=(T0 + us(120), T0 + us(500)))
    uses = by_name(found)
    assert said(uses["do_sync_core"].came) == {"sent by stress (200) on CPU 0 from smp_call_function_many_cond": 1}
    # Only the part of the slice inside the window counts.
    assert uses["other"].ns == pytest.approx(us(300))
    assert found.cpus[1].workload_ns == pytest.approx(us(79))


def test_time_is_conserved_when_exits_are_lost_or_outside_the_trace() -> None:
    # An IRQ whose exit was lost inside a softirq, another open across a switch, a timer open when the
    # window ends, and a kworker's work item it sleeps in and ends on an unwatched CPU.
    lines = [
        "  work-100   [001] d.s1. 1000.000100: softirq_entry: vec=1 [action=TIMER]",
        "  work-100   [001] d.h1. 1000.000110: irq_handler_entry: irq=24 name=virtio0-input.0",
        "  work-100   [001] d.s1. 1000.000130: softirq_exit: vec=1 [action=TIMER]",
        "  work-100   [001] d.h1. 1000.000200: irq_handler_entry: irq=25 name=virtio0-output.0",
        "  work-100   [001] d..2. 1000.000205: sched_switch: prev_comm=work prev_pid=100 prev_prio=120 "
        "prev_state=R ==> next_comm=kworker/u4:1 next_pid=50 next_prio=120",
        "  kworker/u4:1-50 [001] ...1. 1000.000210: workqueue_execute_start: work struct 00000000bbbb0001: "
        "function flush_to_ldisc",
        "  kworker/u4:1-50 [001] d..2. 1000.000240: sched_switch: prev_comm=kworker/u4:1 prev_pid=50 "
        "prev_prio=120 prev_state=D ==> next_comm=work next_pid=100 next_prio=120",
        "  kworker/u4:1-50 [000] d..2. 1000.000300: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 "
        "prev_state=R ==> next_comm=kworker/u4:1 next_pid=50 next_prio=120",
        "  kworker/u4:1-50 [000] ...1. 1000.000320: workqueue_execute_end: work struct 00000000bbbb0001: "
        "function flush_to_ldisc",
        "  work-100   [001] d.h1. 1000.000400: hrtimer_expire_entry: hrtimer=0000000011112222 "
        "function=tick_nohz_handler now=1000000400000",
    ]
    found = account(lines, frozenset({1}), to_ns, workload=(100,), window=(T0, T0 + us(500)))
    cpu, uses = found.cpus[1], by_name(found)
    # Nothing is lost: the window is the workload, idle and the intruders, to the nanosecond.
    assert cpu.workload_ns + cpu.idle_ns + cpu.intruded_ns == pytest.approx(us(500), abs=1e-3)
    # The IRQ inside the softirq closes with it, the one open across the switch at the switch; each counts once.
    for name, ns in (("irq 24 (virtio0-input.0)", 20), ("softirq TIMER", 10), ("irq 25 (virtio0-output.0)", 5)):
        assert uses[name].ns == pytest.approx(us(ns)) and uses[name].count == 1, name
    # The work item is charged here for what it ran here, though it ended on CPU 0.
    assert uses["flush_to_ldisc"].ns == pytest.approx(us(30)) and uses["kworker/u4:1"].ns == pytest.approx(us(5))
    # The timer still running as the window ends counts as far as it went.
    assert uses["tick_nohz_handler"].ns == pytest.approx(us(100)) and uses["tick_nohz_handler"].count == 1


def test_the_clock_marks_convert_a_tsc_trace_to_nanoseconds() -> None:
    text = ("  python3-9 [000] ..... 5000000: tracing_mark_write: quietcore-clock 1000000000\n"
            "  python3-9 [000] ..... 7000000: tracing_mark_write: quietcore-clock 1001000000\n")  # fmt: skip
    to_ns, window = tracer.marked_clock(text, "x86-tsc")
    assert window == (1e9, 1.001e9) and to_ns("6000000") == pytest.approx(1.0005e9)
    with pytest.raises(ValueError, match="lost its clock marks"):
        tracer.marked_clock(text.splitlines()[0], "x86-tsc")


def test_episodes_and_a_gap_explained_with_what_ran_in_it() -> None:
    found = account(TRACE.read_text().splitlines(), frozenset({1}), to_ns, workload=(100,),
                    window=(T0, T0 + us(1000)), episodes=True)  # fmt: skip
    episodes = found.cpus[1].episodes
    task = next(e for e in episodes if e.kind == "task" and e.name == "intruder")
    assert (task.start, task.end, task.pid) == (T0 + us(200), T0 + us(500), 300)
    assert said(task.came) == {"woken by stress (200) on CPU 0": 1}
    # The IPI's sender was recorded after it arrived: the episode has it all the same.
    tlb = next(e for e in episodes if e.name == "flush_tlb_func")
    assert said(tlb.came) == {"sent by the workload on CPU 0 from on_each_cpu_cond_mask": 1}
    # A gap of the probe from 150 to 560 µs: the intruder's slice and the IRQ inside it, the rest untraced.
    out = explain_gaps({1: ([T0 + us(150)], [us(410)])}, found, above_ns=us(100))
    (gap,) = out["cpus"][0]["gaps"]
    assert [(e["kind"], e["name"], e["at_ns"], e["ns"]) for e in gap["inside"]] == [
        ("task", "intruder", us(50), us(300)), ("irq", "irq 24 (virtio0-input.0)", us(150), us(10))]  # fmt: skip
    assert gap["untraced_ns"] == pytest.approx(us(110))
    (table, *notes) = items(out)
    assert isinstance(table, Table) and table.title == "CPU 1: 1 gap over 100 µs."
    row = [str(next(iter(c.cells))) for c in table.columns]
    assert row[:3] == ["1000.000150", "410.0", "110.0"]
    assert row[3].split("\n")[0] == "+50.0 task intruder (300), 300.0 µs, woken by stress (200) on CPU 0"
    assert row[3].split("\n")[1] == "+150.0 irq 24 (virtio0-input.0), 10.0 µs, inside task intruder (300)"
    assert any("A negative start" in n for n in notes if isinstance(n, str))


def test_a_kernel_stack_goes_with_the_context_it_began_or_the_task_it_woke() -> None:
    lines = [
        "  work-100  [001] d.h1. 1000.000100: irq_handler_entry: irq=24 name=virtio0-input.0",
        "  work-100  [001] d.h1. 1000.000101: <stack trace>",
        " => trace_event_raw_event_irq_handler_entry",
        " => __handle_irq_event_percpu+0x80/0x1c0",
        " => handle_irq_event+0x38/0x80",
        "  work-100  [001] d.h1. 1000.000110: irq_handler_exit: irq=24 ret=handled",
        "  other-7   [000] d..2. 1000.000200: sched_waking: comm=kw pid=50 prio=120 target_cpu=001",
        "  other-7   [000] d..2. 1000.000201: <stack trace>",
        " => try_to_wake_up+0x1/0x2",
        " => kick_pool+0x1/0x2",
        "  work-100  [001] d..2. 1000.000300: sched_switch: prev_comm=work prev_pid=100 prev_prio=120 prev_state=S "
        "==> next_comm=kw next_pid=50 next_prio=120",
        "  kw-50     [001] d..2. 1000.000400: sched_switch: prev_comm=kw prev_pid=50 prev_prio=120 prev_state=I "
        "==> next_comm=work next_pid=100 next_prio=120",
    ]
    found = account(lines, frozenset({1}), to_ns, workload=(100,), window=(T0, T0 + us(500)), episodes=True)
    irq, task = found.cpus[1].episodes
    # The tracer's own frame is dropped; offsets too.
    assert irq.stack == ["__handle_irq_event_percpu", "handle_irq_event"]
    assert (task.name, task.stack) == ("kw", ["try_to_wake_up", "kick_pool"])
    assert found.cpus[1].uses[("irq", "irq 24 (virtio0-input.0)", None)].ns == pytest.approx(us(10))


def test_many_cpus_are_one_table_each_source_with_the_cpus_it_hit(found: Trace) -> None:
    """From ONE_TABLE_FROM CPUs `intruders` prints one table, not one a CPU: the
    real trace's CPU as twelve, each with its own kworker, the intruder task on
    one of them alone."""
    import json

    from rich.console import Console

    from quietcore.report.kinds.intruders import KIND, ONE_TABLE_FROM
    from quietcore.runs.model import Run

    one = found.to_json()["cpus"][0]
    cpus = []
    for n in range(12):
        text = json.dumps(one).replace("kworker/1:1", f"kworker/{n}:1").replace('"pid": 50', f'"pid": {50 + n}')
        cpu = {**json.loads(text), "cpu": n}
        if n != 5:
            cpu["sources"] = [s for s in cpu["sources"] if s["name"] != "intruder"]
        cpus.append(cpu)
    assert len(cpus) >= ONE_TABLE_FROM
    run = Run("intruders", {}, "", "", {}, "{}", analysis={"cpus": cpus, "cpus_text": "0-11", "workload_text": "w"})
    out = Console(width=250, record=True)
    shown = KIND.lines(run, out)
    tables = [t for t in shown if not isinstance(t, str)]
    assert len(tables) == 1
    for item in shown:
        out.print(item)
    said = out.export_text()
    # the source names the row, first; its CPUs third, past its kind
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in said.splitlines() if line.count("│") > 5}
    assert rows["intruder (300)"] == "5" and rows["kworker/N"] == "0-11" and rows["flush_tlb_func"] == "0-11"
    assert "CPUs 0-11: 12.000 ms traced in all" in said and "kworker/3:1" not in said
    assert "queued by stress (200) on CPU 0, 12 times" in said  # each CPU's way it came, summed


def test_an_ipi_sent_to_a_cpumask_reaches_the_cpus_its_hex_words_name() -> None:
    # The kernel prints __get_cpumask as 32-bit hex words, highest first: CPUs 1 and 33 of 64
    # bits here. The fields' pattern cut it at the comma, and "00000002" read as a list was CPU 0.
    lines = [
        "  stress-200 [000] d..2. 1000.000100: ipi_send_cpumask: cpumask=00000002,00000002 "
        "callsite=native_smp_send_reschedule+0x1/0x2 callback=0x0",
        "  work-100   [001] d.h1. 1000.000110: reschedule_entry: vector=253",
        "  work-100   [001] d.h1. 1000.000112: reschedule_exit: vector=253",
        "  work-102   [033] d.h1. 1000.000120: reschedule_entry: vector=253",
        "  work-102   [033] d.h1. 1000.000125: reschedule_exit: vector=253",
    ]
    found = account(lines, frozenset({0, 1, 33}), to_ns, workload=(100, 102), window=(T0, T0 + us(500)))
    sent = "sent by stress (200) on CPU 0 from native_smp_send_reschedule"
    for cpu in (1, 33):
        (use,) = [u for u in found.cpus[cpu].uses.values() if u.name == "reschedule"]
        assert said(use.came) == {sent: 1}, (cpu, use.came)
    assert not [u for u in found.cpus[0].uses.values() if u.name == "reschedule"]

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quietcore.facts.interrupts import parse_interrupts
from quietcore.facts.irqs import read_irqs
from quietcore.facts.root import Root
from quietcore.facts.tasks import parse_stat, read_tasks
from tests.conftest import ARM_ROOT, KVM_ROOT, XEON_ROOT


def test_x86_rows_of_this_machine() -> None:
    cpus, rows = parse_interrupts(Root(KVM_ROOT).read_text("proc/interrupts") or "")
    assert cpus == [0, 1]
    by_name = {r.name: r for r in rows}
    assert by_name["36"].device == "virtio1-req.0"
    assert by_name["LOC"].description == "Local timer interrupts" and set(by_name["LOC"].counts) == {0, 1}


def test_shared_and_spaced_device_names() -> None:
    _, rows = parse_interrupts(Root(XEON_ROOT).read_text("proc/interrupts") or "")
    by_name = {r.name: r for r in rows}
    assert by_name["16"].device == "ehci_hcd:usb1, i801_smbus"
    assert by_name["121"].device == "Mellanox async events"
    assert by_name["ERR"].counts == {0: 0}


def test_arm64_gic_rows() -> None:
    cpus, rows = parse_interrupts(Root(ARM_ROOT).read_text("proc/interrupts") or "")
    assert cpus == list(range(8))
    by_name = {r.name: r for r in rows}
    assert by_name["11"].device == "arch_timer"
    assert by_name["56"].device == "ena-mgmnt@pci:0000:00:05.0"
    assert by_name["IPI3"].description == "CPU stop (for crash dump) interrupts"


@pytest.mark.parametrize("text", ["", "garbage\n1: 2 3", "  24: 1 0 IO-APIC"])
def test_no_header_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_interrupts(text)


names = st.from_regex(r"[a-z][a-z0-9_\-@:.]{0,12}( [a-z0-9]{1,6}){0,2}", fullmatch=True)


@given(
    st.lists(st.integers(0, 511), min_size=1, max_size=40, unique=True).map(sorted),
    st.lists(
        st.tuples(st.integers(0, 4000), names, st.sampled_from(["edge", "Edge", "Level", "fasteoi"])),
        max_size=20,
        unique_by=lambda irq: irq[0],
    ),
    st.data(),
)
def test_any_cpu_count_and_device_names(cpus: list[int], irqs: list[tuple[int, str, str]], data: st.DataObject) -> None:
    header = "      " + "".join(f"CPU{c:<8}" for c in cpus)
    lines, expected = [header], {}
    for irq, device, trigger in irqs:
        counts = data.draw(st.lists(st.integers(0, 10**12), min_size=len(cpus), max_size=len(cpus)))
        lines.append(f"{irq:>4}: " + " ".join(f"{n:>10}" for n in counts) + f"  PCI-MSI 524288-{trigger}      {device}")
        expected[str(irq)] = (dict(zip(cpus, counts, strict=True)), device)
    parsed_cpus, rows = parse_interrupts("\n".join(lines))
    assert parsed_cpus == cpus
    for row in rows:
        assert (row.counts, row.device) == expected[row.name]


def test_irq_affinities_named_by_device() -> None:
    irqs = {i.number: i for i in read_irqs(Root(XEON_ROOT))}
    assert irqs[120].device == "mlx5_comp3@pci:0000:3b:00.0"
    assert irqs[120].effective == frozenset({6}) and irqs[120].requested == frozenset({6})
    assert irqs[36].effective == frozenset({1})
    live = read_irqs(Root(KVM_ROOT))
    assert live and all(i.effective for i in live)


def test_stat_comm_with_spaces_and_parens() -> None:
    comm, flags, started = parse_stat("77 (my (odd) name) S 1 77 77 0 -1 2129984 0 0")
    assert comm == "my (odd) name" and flags == 2129984 and started is None  # the line stops before field 22
    line = "77 (a) b) S 1 77 77 0 -1 2129984 0 0 0 0 3 7 0 0 20 0 1 0 4242 0 0"
    assert parse_stat(line) == ("a) b", 2129984, "4242")


def test_tasks_of_fixture() -> None:
    tasks = {t.pid: t for t in read_tasks(Root(XEON_ROOT))}
    assert tasks[2].kthread and not tasks[2].bound
    assert tasks[16].comm == "ksoftirqd/6" and tasks[16].bound and tasks[16].allowed == {6}
    assert not tasks[901].kthread and tasks[901].allowed == {0, 1, 4, 5, 8, 9, 12, 13}

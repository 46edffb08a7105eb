"""The raw per-CPU reader (rawtrace) and its telling as text (telling,
eventformat): pages and formats captured
on this VM (kernel 6.18, x86-tsc) from one tracefs instance, read raw, and
the kernel's own text of the same events from a second instance traced at
the same time (tests/fixtures/rawtrace). Every event, field and stack frame
told from the pages must be what the kernel printed, CPU by CPU."""

from __future__ import annotations

import gzip
import json
import os
import re
import struct
import time
from collections import Counter
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from quietcore.attribution import eventformat, rawtrace, telling
from quietcore.attribution.traceline import LINE
from quietcore.attribution.tracer import intervals

FIXTURE = Path(__file__).parents[1] / "fixtures" / "rawtrace"


def _formats() -> dict[int, eventformat.Format]:
    out = {}
    for text in json.loads((FIXTURE / "formats.json").read_text()).values():
        fmt = eventformat.parse_format(text)
        out[fmt.id] = fmt
    return out


def _pages() -> dict[int, list[bytes]]:
    out = {}
    for cpu in (0, 1):
        blob = gzip.decompress((FIXTURE / f"cpu{cpu}.pages.gz").read_bytes())
        out[cpu] = [blob[i : i + 4096] for i in range(0, len(blob), 4096)]
    return out


def _told() -> str:
    teller = telling.Teller(_formats(), telling.Symbols(FIXTURE / "kallsyms"))
    return telling.tell(_pages(), teller, True, lambda pid: None)


def _by_cpu(text: str) -> dict[str, list[tuple[str, ...]]]:
    """Each CPU's events in order, as (pid, event, fields), a stack's frames
    after it; the kernel hashes %p pointers and prints prev_state from an
    expression the teller leaves as `?`, so those are left out."""
    out: dict[str, list[tuple[str, ...]]] = {}
    cpu = ""
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            cpu = m["cpu"]
            rest = re.sub(r"\b[0-9a-f]{16}\b", "P", m["rest"])
            rest = re.sub(r"prev_state=\S+ ", "", rest)
            out.setdefault(cpu, []).append((m["pid"], m["event"], rest))
        elif "<stack trace>" in line:
            cpu = re.search(r"\[(\d+)\]", line).group(1)  # type: ignore[union-attr]
            out.setdefault(cpu, []).append(("stack",))
        elif line.startswith(" => "):
            out[cpu].append(("frame", line.strip()))
    return out


def test_pages_tell_what_the_kernel_printed_cpu_by_cpu() -> None:
    kernel = _by_cpu(gzip.decompress((FIXTURE / "kernel.txt.gz").read_bytes()).decode())
    told = _by_cpu(_told())
    assert set(told) == set(kernel) == {"000", "001"}
    for cpu, events in kernel.items():
        # The raw instance was started first and stopped last: every event of the kernel's text is told.
        mine = told[cpu]
        assert not Counter(events) - Counter(mine), cpu
        assert len(mine) - len(events) < len(events) / 10  # the events before the other began, after it stopped
        # In order, but for an interrupt that came between an event's write to one instance and to the other.
        same = sum(b.size for b in SequenceMatcher(None, mine, events, autojunk=False).get_matching_blocks())
        assert same >= 0.99 * len(events), cpu
    seen = {e[1] for events in told.values() for e in events if len(e) == 3}
    # the fixture holds what it is for: strings, symbols, tables, choices, stacks
    assert {"sched_switch", "irq_handler_entry", "softirq_entry", "workqueue_execute_start", "ipi_send_cpu",
            "hrtimer_expire_entry", "csd_queue_cpu"} <= seen  # fmt: skip
    assert sum(1 for events in told.values() for e in events if e[0] == "frame") > 20


def test_telling_says_how_far_it_is_and_tells_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 384 CPUs telling takes a minute or more after the run: `intruders` shows a bar from
    tell's progress, the share of the records told, which leaves the text as it was."""
    monkeypatch.setattr(telling, "PROGRESS_EVERY", 100)
    teller = telling.Teller(_formats(), telling.Symbols(FIXTURE / "kallsyms"))
    shares: list[float] = []
    text = telling.tell(_pages(), teller, True, lambda pid: None, progress=shares.append)
    assert text == _told()
    records = sum(1 for line in text.splitlines() if not line.startswith(" => "))
    assert shares[0] == 0.0 and shares == sorted(shares) and 0.9 < shares[-1] < 1.0, shares[-3:]
    assert len(shares) >= records // 100, (len(shares), records)


def test_the_told_text_gives_the_kernels_spans() -> None:
    """Interrupts, softirqs and switches: the spans the noise is matched to
    are the same, CPU by CPU (their times are each buffer's own)."""
    kernel = gzip.decompress((FIXTURE / "kernel.txt.gz").read_bytes()).decode()
    told = _told()

    def names(text: str) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for span in intervals(text, float, probe_comm="python3"):
            out.setdefault(span.cpu, []).append(span.name)
        return out

    theirs, mine = names(kernel), names(told)
    assert set(theirs) == set(mine) == {0, 1}
    for cpu, spans in theirs.items():
        assert not Counter(spans) - Counter(mine[cpu])
        assert len(mine[cpu]) - len(spans) < len(spans) / 10


def _page(records: list[bytes], ts: int = 1000) -> bytes:
    return struct.pack("<QQ", ts, sum(len(r) for r in records)) + b"".join(records)


def test_time_extends_long_records_padding_and_an_empty_rest() -> None:
    small = struct.pack("<I", (5 << 5) | 2) + bytes(8)  # type_len 2: 8 bytes of data, 5 after the page's time
    extend = struct.pack("<II", ((1 << 27) - 1) << 5 | rawtrace.TIME_EXTEND, 3)  # (3 << 27) + 2**27 - 1
    long = struct.pack("<II", (1 << 5) | 0, 4 + 200) + bytes(200)  # type_len 0: the length follows
    discarded = struct.pack("<II", (7 << 5) | rawtrace.PADDING, 12) + bytes(8)  # 12 bytes after its header word
    page = _page([small, extend, long, discarded, small])
    got = list(rawtrace.events(page + bytes(64)))
    assert [(ts, n) for ts, _, n in got] == [
        (1005, 8),
        (1005 + (3 << 27) + (1 << 27) - 1 + 1, 200),
        (1005 + (3 << 27) + (1 << 27) - 1 + 1 + 7 + 5, 8),
    ]
    # a null padding ends the page however long the commit says it is
    assert len(list(rawtrace.events(_page([small, struct.pack("<I", rawtrace.PADDING), bytes(8)])))) == 1
    # the missed-events flags in the commit word are no part of the length
    flagged = bytearray(page)
    flagged[8:16] = struct.pack("<Q", len(page) - 16 | 1 << 31)
    assert len(list(rawtrace.events(bytes(flagged)))) == 3


def test_a_truncated_page_ends_without_reading_past_it() -> None:
    long = struct.pack("<II", 0, 4 + 200) + bytes(50)  # says 200 bytes, has 50
    page = struct.pack("<QQ", 0, 4000) + long
    assert [n for _, _, n in rawtrace.events(page)] == [200]  # given, and no record cut short is read as more


def test_a_name_with_a_newline_cannot_make_a_line() -> None:
    """A task names itself with any bytes but NUL: the told line stays one line."""
    fmt = eventformat.parse_format(json.loads((FIXTURE / "formats.json").read_text())["sched/sched_waking"])
    rec = bytearray(36)
    struct.pack_into("<HBBi", rec, 0, fmt.id, 0, 0, 42)
    rec[8:24] = b"evil\n  x-1 [0]".ljust(16, b"\0")
    struct.pack_into("<iii", rec, 24, 43, 120, 1)
    page = _page([struct.pack("<I", (9 << 5) | 9) + bytes(rec)])
    teller = telling.Teller({fmt.id: fmt}, telling.Symbols(FIXTURE / "kallsyms"))
    text = telling.tell({0: [page]}, teller, True, {42: "also\nbad"}.get)
    assert text.count("\n") == 1
    assert "comm=evil?  x-1 [0] pid=43 prio=120 target_cpu=001" in text and "also?bad-42" in text


@pytest.mark.parametrize(("data", "printed"), [
    (bytes([3, 0, 0, 0, 0, 0, 0, 0]), "00000000,00000003"),
    ((1 << 40 | 1 << 33).to_bytes(8, "little"), "00000102,00000000"),
    (bytes([5]), "05"),
])  # fmt: skip
def test_cpumasks_print_as_the_kernels_hex_bitmap(data: bytes, printed: str) -> None:
    assert eventformat._bitmap(data) == printed


def test_an_argument_of_a_shape_not_known_prints_a_question_mark() -> None:
    fmt = eventformat.parse_format(
        "name: made\nID: 900\nformat:\n\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;\n\n"
        'print fmt: "a=%d b=%s c=%03d", REC->a, some_helper(REC->a), (int) REC->a\n'
    )
    rec = struct.pack("<HBBii", 900, 0, 0, 1, 7)
    assert telling.Teller({900: fmt}, telling.Symbols(FIXTURE / "kallsyms")).body(fmt, rec) == "a=7 b=? c=007"


def test_a_header_page_of_another_layout_is_not_read_raw(tmp_path: Path) -> None:
    (tmp_path / "header_page").write_text((FIXTURE / "header_page").read_text())
    assert rawtrace.layout(tmp_path) == 16
    (tmp_path / "header_page").write_text("\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
                                          "\tfield: local_t commit;\toffset:8;\tsize:4;\tsigned:1;\n"
                                          "\tfield: char data;\toffset:12;\tsize:4084;\tsigned:0;\n")  # fmt: skip
    assert rawtrace.layout(tmp_path) is None  # a 32-bit kernel's: the merged text is read
    assert rawtrace.layout(tmp_path / "none") is None


def test_a_quiet_buffer_is_read_once_a_second_and_a_filling_one_each_drain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 384 CPUs the reads of empty buffers would be the reader's cost:
    a buffer is read when it may be a quarter full by the rate it filled
    at, and at least once a second. Named pipes stand in for the buffers."""
    for cpu in (0, 1):
        (tmp_path / "per_cpu" / f"cpu{cpu}").mkdir(parents=True)
        os.mkfifo(tmp_path / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw")
    assert rawtrace.CpuBuffers({}, 4096, buffer_bytes=1 << 20).longest == 0.25  # a burst's bound, 1 MB a second
    monkeypatch.setattr(rawtrace, "BURST_BYTES_S", 1)  # no burst to fear: the rates and the second alone
    clock = [100.0]
    monkeypatch.setattr(rawtrace.time, "monotonic", lambda: clock[0])
    files = {cpu: tmp_path / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw" for cpu in (0, 1)}
    buffers = rawtrace.CpuBuffers(files, 4096, buffer_bytes=32 * 1024)
    busy = os.open(tmp_path / "per_cpu" / "cpu0" / "trace_pipe_raw", os.O_WRONLY | os.O_NONBLOCK)
    quiet = os.open(tmp_path / "per_cpu" / "cpu1" / "trace_pipe_raw", os.O_WRONLY | os.O_NONBLOCK)
    try:
        read_at = []
        for step in range(40):  # 2 s of drains every 50 ms; cpu0 fills 16 KB a drain: 320 KB a second
            os.write(busy, bytes(4096) * 4)
            buffers.drain(everything=step == 0)
            read_at.append(dict(buffers._read_at))
            clock[0] += 0.05
        assert sum(len(p) for p in buffers.pages[0]) == 40 * 16384  # nothing left behind
        assert len({r[0] for r in read_at}) == 40  # read at every drain: a quarter of 32 KB fills in 25 ms
        assert len({r[1] for r in read_at}) == 2  # at the start, and a second later
        os.write(quiet, bytes(4096))
        clock[0] += 1.0
        assert buffers.drain(everything=False) >= 4096 and buffers.pages[1]
    finally:
        os.close(busy)
        os.close(quiet)
        buffers.close()


def test_where_the_kernel_wakes_the_reader_a_full_buffer_is_read_at_once_and_a_quiet_one_once_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With buffer_percent set, `due` polls the buffers and the kernel says
    which is a quarter full; the others wait for a second, whatever their
    rate. Named pipes stand in for the buffers: a pipe holding data polls
    readable, as a buffer past its buffer_percent does."""
    files = {}
    for cpu in (0, 1):
        files[cpu] = tmp_path / f"cpu{cpu}"
        os.mkfifo(files[cpu])
    clock = [100.0]
    monkeypatch.setattr(rawtrace.time, "monotonic", lambda: clock[0])
    buffers = rawtrace.CpuBuffers(files, 4096, buffer_bytes=32 * 1024, woken=True)
    full = os.open(files[0], os.O_WRONLY | os.O_NONBLOCK)
    quiet = os.open(files[1], os.O_WRONLY | os.O_NONBLOCK)
    try:
        assert buffers.longest == rawtrace.EVERY_S and buffers.next_wait(0.05) == rawtrace.EVERY_S
        clock[0] += 0.3
        assert buffers.next_wait(0.05) == pytest.approx(0.7)  # the quiet ones' second, not every_s
        assert buffers.due(0.0) == frozenset()  # nothing full: the wait times out
        os.write(full, bytes(4096) * 2)
        ready = buffers.due(1.0)
        assert ready == frozenset({0})
        os.write(quiet, bytes(100))  # a few events, far from a quarter: the kernel wakes no reader for them
        buffers.drain(everything=False, full=ready)
        assert sum(len(p) for p in buffers.pages[0]) == 8192 and not buffers.pages[1]  # the quiet one waits
        clock[0] += 0.7
        buffers.drain(everything=False)
        assert buffers.pages[1]  # its second is up
        # the reader's stop ends a wait at once
        buffers.wake()
        assert buffers.due(10.0) == frozenset()
    finally:
        os.close(full)
        os.close(quiet)
        buffers.close()


def test_a_kernel_whose_poll_wakes_for_any_data_is_read_at_set_times(tmp_path: Path) -> None:
    """Before Linux 6.1, poll said a buffer was ready whenever it held an
    event, whatever buffer_percent: a woken reader would wake for every few
    events. Three wakes that find a buffer far from a quarter full, and the
    buffers are read at set times; a named pipe polls ready as such a
    kernel's buffer does."""
    path = tmp_path / "cpu0"
    os.mkfifo(path)
    buffers = rawtrace.CpuBuffers({0: path}, 4096, buffer_bytes=1 << 20, woken=True)
    writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        for _ in range(rawtrace.EARLY_WAKES):
            assert buffers.woken
            os.write(writer, bytes(100))  # an event or two
            ready = buffers.due(1.0)
            assert ready == frozenset({0})
            buffers.drain(everything=False, full=ready)
        assert not buffers.woken and buffers.longest == 0.25  # the burst's bound, as without buffer_percent
        os.write(writer, bytes(100))
        started = time.monotonic()
        assert buffers.due(0.05) == frozenset()  # data waiting no longer wakes it: the wait runs its time
        assert time.monotonic() - started >= 0.04
        assert buffers.next_wait(0.05) == 0.05
    finally:
        os.close(writer)
        buffers.close()


def test_a_record_shorter_than_its_format_prints_what_it_holds() -> None:
    fmt = eventformat.parse_format(json.loads((FIXTURE / "formats.json").read_text())["sched/sched_waking"])
    rec = bytearray(28)  # comm and pid, no prio nor target_cpu
    struct.pack_into("<HBBi", rec, 0, fmt.id, 0, 0, 42)
    rec[8:24] = b"kworker/1:1".ljust(16, b"\0")
    struct.pack_into("<i", rec, 24, 77)
    body = telling.Teller({fmt.id: fmt}, telling.Symbols(FIXTURE / "kallsyms")).body(fmt, bytes(rec))
    assert body == "comm=kworker/1:1 pid=77 prio=? target_cpu=?"

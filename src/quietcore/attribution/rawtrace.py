"""Each CPU's trace buffer read as the kernel keeps it, a page at a time
(`per_cpu/cpuN/trace_pipe_raw`, as trace-cmd reads it): the pages while the
run goes on, and the records they hold. They are told as tracefs's text
once the run is over (attribution.telling).

Why: the merged `trace_pipe` formats every event as text in the kernel, on
the reader's CPU, and finds each next one by peeking every CPU's buffer. At
2 µs a line, a node of 384 CPUs ticking at 250 Hz would keep a housekeeping
CPU a third busy. A raw page holds a hundred events and costs a copy, so
the reader's share stays near what its wake-ups cost; the formatting is
done after the run, in the analysis.

The page and event layouts are the ring buffer's (kernel/trace/ring_buffer.c,
`events/header_page`, `events/header_event`)."""

from __future__ import annotations

import contextlib
import os
import select
import struct
import time as time
from collections.abc import Iterator
from pathlib import Path

from quietcore.attribution.eventformat import FIELD_LINE

#: the event header's type_len values past the data lengths (header_event)
PADDING, TIME_EXTEND, TIME_STAMP = 29, 30, 31
#: a page's commit word carries these flags over the data's length
MISSED_FLAGS = (1 << 31) | (1 << 30)
#: an absolute timestamp keeps the low 59 bits; the page's time gives the rest
ABS_BITS = 59
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def events(page: bytes, data_at: int = 16) -> Iterator[tuple[int, int, int]]:
    """(timestamp, offset, length) of each record in one page read from
    trace_pipe_raw: its time stamp and commit word, then events, each a
    5-bit type_len and a 27-bit time delta (header_event)."""
    if len(page) < data_at:
        return
    ts = _U64.unpack_from(page, 0)[0]
    end = data_at + (_U64.unpack_from(page, 8)[0] & 0xFFFFFFFF & ~MISSED_FLAGS)
    end = min(end, len(page))
    at = data_at
    while at + 4 <= end:
        head = _U32.unpack_from(page, at)[0]
        kind, delta = head & 0x1F, head >> 5
        if kind == PADDING:
            if delta == 0:  # the rest of the page is empty
                return
            ts += delta  # an event discarded after it was reserved: its time still counts
            at += 4 + _U32.unpack_from(page, at + 4)[0]
        elif kind == TIME_EXTEND:
            ts += (_U32.unpack_from(page, at + 4)[0] << 27) | delta
            at += 8
        elif kind == TIME_STAMP:
            low = ((_U32.unpack_from(page, at + 4)[0] << 27) | delta) & ((1 << ABS_BITS) - 1)
            ts = (ts & ~((1 << ABS_BITS) - 1)) | low
            at += 8
        elif kind == 0:  # a long record: its length (with this word) follows the header
            length = _U32.unpack_from(page, at + 4)[0]
            ts += delta
            yield ts, at + 8, length - 4
            at += 4 + length
        else:
            ts += delta
            yield ts, at + 4, kind * 4
            at += 4 + kind * 4


#: a buffer is read once it may be this full, by the rate it filled at before
FILL = 0.25
#: and at least this often, however slowly it filled
EVERY_S = 1.0
#: where the kernel wakes no reader, nor later than a burst at this many bytes a second (25,000 events) would fill
#: FILL of it: a CPU quiet so far can start a workload (its fork and exec, its faults) at once; 1 MB buffers are
#: read every 0.25 s at least, 8 MB ones every second
BURST_BYTES_S = 1 << 20
#: After this many wakes that found a buffer under half of FILL, the kernel is taken not to keep to the
#: watermark in poll, and the buffers are read at set times (CpuBuffers._unwatch).
EARLY_WAKES = 3


class CpuBuffers:
    """An instance's per-CPU buffers, open for the whole run, read without
    blocking; nothing is decoded while the run goes on. Which buffers a
    drain reads, two ways:

    - `woken` (the instance's buffer_percent is FILL): the reader waits in
      `due`, a poll of every buffer, and the kernel says which is FILL
      full; a drain reads those, and any not read for EVERY_S.
    - else, at set times: a drain reads the buffers that may be FILL full
      by now, by the rate each filled at, and every one at least each
      EVERY_S or as soon as a burst (BURST_BYTES_S) could fill FILL of it.
      A kernel whose poll ignores the watermark is put back on these
      (`_unwatch`).

    At 384 CPUs a read of an empty buffer costs the reader 1.4 µs here:
    read every 50 ms, the buffers of quiet CPUs would take 1 % of a CPU."""

    def __init__(self, files: dict[int, Path], page_size: int, data_at: int = 16, buffer_bytes: int = 0,
                 woken: bool = False) -> None:  # fmt: skip
        """`files`: each CPU's trace_pipe_raw. `woken`: the kernel wakes a
        reader in `due` once a buffer is FILL full (its instance's
        buffer_percent is set), so a buffer waits for that or EVERY_S, not
        for its rate or a burst's bound: at 384 CPUs, a poll of every
        buffer each 50 ms was 0.4 % of a CPU."""
        cpus = sorted(files)
        self.page_size, self.data_at, self.buffer_bytes, self.woken = page_size, data_at, buffer_bytes, woken
        # the longest a buffer waits
        self.longest = EVERY_S if woken else min(EVERY_S, FILL * buffer_bytes / BURST_BYTES_S)
        self._early = 0  # wakes that found a buffer far from FILL full (see drain)
        self.pages: dict[int, list[bytes]] = {cpu: [] for cpu in cpus}
        self.reads = 0  # read calls, for the reader's own account
        self._read_at = dict.fromkeys(cpus, time.monotonic())
        self._rate = dict.fromkeys(cpus, 0.0)  # bytes a second, as last seen
        self.fds: dict[int, int] = {}
        self._poll = select.poll()
        self._cpu_of: dict[int, int] = {}
        self._waker = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # wake(): a reader waiting in due() stops waiting
        self._poll.register(self._waker[0], select.POLLIN)
        try:
            for cpu in cpus:
                self.fds[cpu] = os.open(files[cpu], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
                self._cpu_of[self.fds[cpu]] = cpu
                if woken:  # else due() is a wait that wake() ends: a buffer with data polls ready, always
                    self._poll.register(self.fds[cpu], select.POLLIN)
        except OSError:
            self.close()
            raise

    def due(self, timeout_s: float) -> frozenset[int]:
        """Wait up to `timeout_s` for a buffer the kernel says is past its
        instance's buffer_percent (a burst between two reads), and return
        those CPUs (none at the timeout, or when wake() ends the wait). With
        buffer_percent 0 the kernel says so of any buffer not empty, so the
        session sets it (TraceSession); where the buffers are read at set
        times (not `woken`), the wait is for wake() alone."""
        try:
            ready = self._poll.poll(max(timeout_s, 0.0) * 1000)
        except InterruptedError:
            return frozenset()
        return frozenset(self._cpu_of[fd] for fd, happened in ready if happened & select.POLLIN and fd in self._cpu_of)

    def next_wait(self, every_s: float) -> float:
        """How long the reader may wait in `due` before a drain: `every_s`,
        or, where the kernel wakes it (`woken`), until a buffer's EVERY_S is up."""
        if not self.woken or not self._read_at:
            return every_s
        return max(min(self._read_at.values()) + self.longest - time.monotonic(), 0.0)

    def wake(self) -> None:
        """End a wait in due() now (its reader is to stop)."""
        with contextlib.suppress(OSError):  # woken already (the pipe is full), or closed
            os.write(self._waker[1], b"x")

    def drain(self, everything: bool = True, full: frozenset[int] = frozenset()) -> int:
        """Bytes read: every page of each buffer due, by its rate and wait or
        in `full` (`everything`: of all)."""
        got, now = 0, time.monotonic()
        for cpu, fd in self.fds.items():
            since = now - self._read_at[cpu]
            if (not everything and cpu not in full and since < self.longest
                    and (self.woken or since * self._rate[cpu] < FILL * self.buffer_bytes)):  # fmt: skip
                continue
            kept, here = self.pages[cpu], 0
            while True:
                self.reads += 1
                try:
                    page = os.read(fd, self.page_size)
                except BlockingIOError:  # this buffer is empty, for now
                    break
                if not page:
                    break
                kept.append(page)
                here += len(page)
            # a burst is believed at once, a lull only by halves
            self._rate[cpu] = max(here / max(since, 1e-3), self._rate[cpu] / 2)
            self._read_at[cpu] = now
            got += here
            if self.woken and cpu in full and here < FILL * self.buffer_bytes / 2:
                self._early += 1
        if self._early >= EARLY_WAKES:
            self._unwatch()
        return got

    def _unwatch(self) -> None:
        """Read at set times from now on: this kernel's poll says a buffer is
        ready whenever it holds data, whatever its buffer_percent (the poll
        kept to the watermark from Linux 6.1), and the reader would wake for
        every few events."""
        for fd in self.fds.values():
            self._poll.unregister(fd)
        self.woken = False
        self.longest = min(EVERY_S, FILL * self.buffer_bytes / BURST_BYTES_S)

    def close(self) -> None:
        for fd in self.fds.values():
            if self.woken:
                self._poll.unregister(fd)
            os.close(fd)
        self.fds, self._cpu_of = {}, {}
        if self._waker[0] >= 0:
            self._poll.unregister(self._waker[0])
            for fd in self._waker:
                os.close(fd)
            self._waker = (-1, -1)


def layout(events_dir: Path) -> int | None:
    """Where a page's events begin, if its header is the ring buffer's as
    this reader knows it (a 64-bit time stamp, then an 8-byte commit word);
    None where it is not, and the merged text must be read instead."""
    try:
        text = (events_dir / "header_page").read_text()
    except OSError:
        return None
    fields = {m["decl"].split()[-1]: (int(m["off"]), int(m["size"])) for m in FIELD_LINE.finditer(text)}
    if fields.get("timestamp") != (0, 8) or fields.get("commit") != (8, 8) or "data" not in fields:
        return None
    return fields["data"][0]

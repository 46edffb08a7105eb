"""Each CPU's trace buffer read as the kernel keeps it, a page at a time
(`per_cpu/cpuN/trace_pipe_raw`, as trace-cmd reads it), and told as
tracefs's text lines once the run is over.

Why: the merged `trace_pipe` formats every event as text in the kernel, on
the reader's CPU, and finds each next one by peeking every CPU's buffer. At
2 µs a line, a node of 384 CPUs ticking at 250 Hz would keep a housekeeping
CPU a third busy. A raw page holds a hundred events and costs a copy, so
the reader's share stays near what its wake-ups cost; the formatting is
done after the run, in the analysis.

The page and event layouts are the ring buffer's (kernel/trace/ring_buffer.c,
`events/header_page`, `events/header_event`); each event's fields and print
format come from its `format` file. Only the shapes of argument that the
events quietcore enables use are told (a field, a string, a pointer's
symbol, a symbolic table, a choice of two); any other is printed `?`."""

from __future__ import annotations

import bisect
import contextlib
import heapq
import os
import re
import struct
import time as time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path

#: the event header's type_len values past the data lengths (header_event)
PADDING, TIME_EXTEND, TIME_STAMP = 29, 30, 31
#: a page's commit word carries these flags over the data's length
MISSED_FLAGS = (1 << 31) | (1 << 30)
#: an absolute timestamp keeps the low 59 bits; the page's time gives the rest
ABS_BITS = 59
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_PID = struct.Struct("<i").unpack_from


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    size: int
    signed: bool
    kind: str  # "int", "chars" (char[N]), "loc" (__data_loc: offset | length << 16), "array"


@dataclass(frozen=True)
class Format:
    """One event's record layout and how the kernel prints it."""

    id: int
    name: str
    fields: dict[str, Field]
    fmt: str  # the print format's string, its escapes undone
    args: tuple[str, ...]  # its arguments, as C expressions


_FIELD_LINE = re.compile(r"field:\s*(?P<decl>[^;]+);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<s>\d)")


def parse_format(text: str) -> Format:
    """A tracefs `format` file (Documentation/trace/events.rst, "Event formats")."""
    name = re.search(r"^name:\s*(\S+)", text, re.M)
    ident = re.search(r"^ID:\s*(\d+)", text, re.M)
    if not name or not ident:
        raise ValueError("a format file without its name or ID")
    fields: dict[str, Field] = {}
    for m in _FIELD_LINE.finditer(text):
        decl = m["decl"].strip()
        word = re.search(r"(\w+)\s*(\[[^\]]*\])?$", decl)
        if not word:
            continue
        kind = "loc" if decl.startswith("__data_loc") else "int"
        if word.group(2) is not None and kind == "int":
            kind = "chars" if re.match(r"(?:unsigned\s+)?char\b", decl) else "array"
        fields[word.group(1)] = Field(word.group(1), int(m["off"]), int(m["size"]), m["s"] == "1", kind)
    fmt, args = "", tuple[str, ...]()
    printed = re.search(r"^print fmt:\s*(.*)$", text, re.M)
    if printed:
        fmt, args = _print_fmt(printed.group(1))
    return Format(int(ident.group(1)), name.group(1), fields, fmt, args)


def _print_fmt(spec: str) -> tuple[str, tuple[str, ...]]:
    """`"a=%d b=%s" "more", REC->a, __get_str(b)` -> the joined string and its arguments."""
    parts = _split_top(spec)
    strings = re.findall(r'"((?:[^"\\]|\\.)*)"', parts[0]) if parts else []
    fmt = "".join(strings).encode().decode("unicode_escape")
    return fmt, tuple(p.strip() for p in parts[1:])


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets and quotes."""
    out, depth, quoted, start = [], 0, False, 0
    i = 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
        i += 1
    out.append(text[start:])
    return out


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


class Symbols:
    """Kernel text addresses to names, from /proc/kallsyms (root sees the
    addresses; to others they read 0 and every pointer stays a number)."""

    def __init__(self, path: Path = Path("/proc/kallsyms")) -> None:
        self.path = path
        self._addrs: list[int] | None = None
        self._names: list[str] = []

    def _load(self) -> None:
        pairs = []
        try:
            with self.path.open() as handle:
                for line in handle:
                    where, kind, name = line.split(None, 3)[:3]
                    if kind in "tTwW" and where.strip("0"):
                        pairs.append((int(where, 16), name))
        except (OSError, ValueError):
            pairs = []
        pairs.sort(key=itemgetter(0))  # stable: of names at one address, the kernel prints the first listed
        self._addrs, self._names = [], []
        for addr, name in pairs:
            if not self._addrs or self._addrs[-1] != addr:
                self._addrs.append(addr)
                self._names.append(name)

    def name(self, addr: int, offset: bool = False) -> str:
        """`func` (`%ps`), or `func+0x1f/0x80` (`%pS`); the number where none is known."""
        if self._addrs is None:
            self._load()
        assert self._addrs is not None
        i = bisect.bisect_right(self._addrs, addr) - 1
        if addr == 0 or i < 0:
            return f"0x{addr:x}"
        if not offset:
            return self._names[i]
        size = self._addrs[i + 1] - self._addrs[i] if i + 1 < len(self._addrs) else 0
        return f"{self._names[i]}+0x{addr - self._addrs[i]:x}/0x{size:x}"


_CONVERSION = re.compile(r"%(?P<flags>[-0 +#]*)(?P<width>\d*)(?:\.\d+)?(?P<len>hh|h|ll|l|z)?(?P<conv>[diuxXscp%])"
                         r"(?P<ext>[sSB]?)")  # fmt: skip


#: one part of a told line: the record -> its text
Part = Callable[[bytes], str]
Value = Callable[[bytes], "int | str | None"]


#: a field printed as read: it, its %-spec, what makes its text (None: the value itself)
_Plain = tuple[Field, str, Callable[[object], object] | None]


class Teller:
    """Records to the text tracefs prints for them, by their formats: each
    format is turned once into a Python %-template and what fills it. A
    plain field (a number, a char[N]) comes from one unpacking of the
    record's fields; any other argument has a function of its own."""

    def __init__(self, formats: dict[int, Format], symbols: Symbols) -> None:
        self.formats, self.symbols = formats, symbols
        self._plans: dict[int, Part] = {}

    def body(self, fmt: Format, rec: bytes) -> str:
        """The part after `event: `."""
        plan = self._plans.get(fmt.id)
        if plan is None:
            plan = self._plans[fmt.id] = self._plan(fmt)
        return plan(rec)

    def _plan(self, fmt: Format) -> Part:
        template: list[str] = []
        slots: list[tuple[Field | None, Callable[[object], object] | None, Part | None]] = []
        at, args = 0, iter(fmt.args)
        for m in _CONVERSION.finditer(fmt.fmt):
            template.append(fmt.fmt[at : m.start()].replace("%", "%%"))
            at = m.end()
            if m["conv"] == "%":
                template.append("%%")
                continue
            arg = next(args, "")
            plain = self._plain(fmt, m, arg)
            if plain is None:
                template.append("%s")
                slots.append((None, None, self._part(m, _value(fmt, arg))))
            else:
                field, spec, convert = plain
                template.append(spec)
                slots.append((field, convert, None))
        template.append(fmt.fmt[at:].replace("%", "%%"))
        text = "".join(template)
        fields = sorted({f for f, _, _ in slots if f is not None}, key=lambda f: f.offset)
        if not fields:
            parts = [p for _, _, p in slots if p is not None]
            return lambda rec: text % tuple([p(rec) for p in parts])
        code, end = "<", 0
        for f in fields:
            code += ("x" * (f.offset - end)) + (f"{f.size}s" if f.kind == "chars" else _INTS[(f.size, f.signed)][1])
            end = f.offset + f.size
        unpack = struct.Struct(code).unpack_from
        index = {f: i for i, f in enumerate(fields)}
        fill = [_fill(index[field] if field is not None else -1, convert, part) for field, convert, part in slots]
        slow = self._slow(fmt)

        def told(rec: bytes) -> str:
            try:
                v = unpack(rec)
            except struct.error:  # a record shorter than its format: each argument as it can be read
                return slow(rec)
            return text % tuple([f(v, rec) for f in fill])

        return told

    def _plain(self, fmt: Format, m: re.Match[str], arg: str) -> _Plain | None:
        """A field printed as it is read: (it, its %-spec, what makes its text); None for any other argument."""
        field = re.fullmatch(r"REC->(\w+)", re.sub(r"^\((?:\w+\s+)*\w+\s*\**\)\s*", "", arg.strip()))
        f = fmt.fields.get(field.group(1)) if field else None
        if f is None:
            return None
        conv, width = m["conv"], m["width"]
        if f.kind == "chars" and conv == "s" and not width:
            return f, "%s", _chars
        if f.kind != "int" or (f.size, f.signed) not in _INTS:
            return None
        pad = ("0" if "0" in m["flags"] else "") + width
        if conv in "di" or (conv == "u" and not f.signed):
            return f, f"%{pad}d", None
        if conv == "x" and not f.signed:
            return f, f"%{pad}x", None
        if conv == "p" and not f.signed and f.size == 8:
            if not m["ext"]:
                return f, "%016x", None
            name, offset = self.symbols.name, m["ext"] != "s"
            return f, "%s", lambda v: name(v, offset) if isinstance(v, int) else "?"
        return None

    def _slow(self, fmt: Format) -> Part:
        """Every argument read on its own: for a record shorter than its format."""
        parts: list[Part] = []
        at, args = 0, iter(fmt.args)
        for m in _CONVERSION.finditer(fmt.fmt):
            parts.append(_constant(fmt.fmt[at : m.start()] + ("%" if m["conv"] == "%" else "")))
            at = m.end()
            if m["conv"] != "%":
                parts.append(self._part(m, _value(fmt, next(args, ""))))
        parts.append(_constant(fmt.fmt[at:]))
        return lambda rec: "".join([p(rec) for p in parts])

    def _part(self, m: re.Match[str], value: Value) -> Part:
        conv, width = m["conv"], int(m["width"] or 0)
        pad = "0" if "0" in m["flags"] else " "
        name = self.symbols.name

        def told(rec: bytes) -> str:
            v = value(rec)
            if v is None:
                return "?"
            if not isinstance(v, int) or conv == "s":
                return str(v)
            if conv == "p":
                return name(v, offset=m["ext"] != "s") if m["ext"] else f"{v & _MASK64:016x}"
            text = f"{v & _MASK64:x}" if conv in "xX" else str(v & _MASK64 if conv == "u" else v)
            return text.rjust(width, pad) if width else text

        return told


Fill = Callable[[tuple[object, ...], bytes], object]


def _fill(i: int, convert: Callable[[object], object] | None, part: Part | None) -> Fill:
    """One slot of a template: from the unpacked fields (the i-th, as it is
    or made text by `convert`), or from the record by a `part` of its own."""
    if part is not None:
        return lambda v, rec: part(rec)
    if convert is None:
        return lambda v, rec: v[i]
    return lambda v, rec: convert(v[i])


def _chars(value: object) -> str:
    return _text(value) if isinstance(value, bytes) else "?"


_MASK64 = (1 << 64) - 1
_EMPTY: Part = lambda rec: ""  # noqa: E731


def _constant(text: str) -> Part:
    return _EMPTY if not text else (lambda rec: text)


def _value(fmt: Format, arg: str) -> Value:
    """The argument's value, from a record: the C expression's shapes the
    enabled events use; any other gives None, printed `?`."""
    arg = re.sub(r"^\((?:\w+\s+)*\w+\s*\**\)\s*", "", arg.strip())  # a cast: (void *), (unsigned long long)
    field = re.fullmatch(r"REC->(\w+)", arg)
    if field:
        return _reader(fmt.fields.get(field.group(1)))
    loc = re.fullmatch(r"__get_(str|cpumask|bitmask)\((\w+)\)", arg)
    if loc:
        word, bitmap = _reader(fmt.fields.get(loc.group(2))), loc.group(1) != "str"
        return lambda rec: _loc(word(rec), rec, bitmap)
    table = re.fullmatch(r"__print_symbolic\(REC->(\w+),(.*)\)", arg, re.S)
    if table:
        key = _reader(fmt.fields.get(table.group(1)))
        pairs = {_number(k): n for k, n in re.findall(r"\{\s*(-?\w+)\s*,\s*\"([^\"]*)\"\s*\}", table.group(2))}
        return lambda rec: pairs.get(k, str(k)) if isinstance(k := key(rec), int) else None
    choice = re.fullmatch(r"REC->(\w+)\s*\?\s*\"([^\"]*)\"\s*:\s*\"([^\"]*)\"", arg)
    if choice:
        test, yes, no = _reader(fmt.fields.get(choice.group(1))), choice.group(2), choice.group(3)
        return lambda rec: yes if test(rec) else no
    return lambda rec: None


_INTS = {(1, False): "<B", (1, True): "<b", (2, False): "<H", (2, True): "<h", (4, False): "<I", (4, True): "<i",
         (8, False): "<Q", (8, True): "<q"}  # fmt: skip


def _reader(field: Field | None) -> Value:
    """A field's value from a record: a number, or a char[N]'s text."""
    if field is None:
        return lambda rec: None
    at, size = field.offset, field.size
    if field.kind == "chars":
        return lambda rec: _text(rec[at : at + size])
    code = _INTS.get((size, field.signed)) if field.kind in ("int", "loc") else None
    if code is None:
        return lambda rec: None
    unpack = struct.Struct(code).unpack_from
    return lambda rec: unpack(rec, at)[0] if at + size <= len(rec) else None


def _number(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def _read(field: Field | None, rec: bytes) -> int | str | None:
    return _reader(field)(rec)


def _loc(word: int | str | None, rec: bytes, bitmap: bool) -> str | None:
    """A __data_loc field: its word holds where the data is and its length."""
    if not isinstance(word, int):
        return None
    at, size = word & 0xFFFF, (word >> 16) & 0xFFFF
    data = rec[at : at + size]
    return _bitmap(data) if bitmap else _text(data)


#: a task names itself (prctl PR_SET_NAME) with any bytes but NUL: a newline in
#: its name would start a line of its own making in the text told
_CONTROLS = {c: "?" for c in (*range(32), 127)}


def _text(data: bytes) -> str:
    """A C string from a record, up to its NUL, with no control characters."""
    return data.split(b"\0", 1)[0].decode(errors="replace").translate(_CONTROLS)


def _bitmap(data: bytes) -> str:
    """A bitmask as the kernel prints it (`%*pb`): 32-bit words in hex,
    the highest first, comma-separated."""
    nbits, bits = len(data) * 8, int.from_bytes(data, "little")
    words: list[str] = []
    first = nbits % 32 or 32
    for i in range((nbits + 31) // 32 - 1, -1, -1):
        width = (first + 3) // 4 if not words else 8
        words.append(f"{(bits >> (32 * i)) & 0xFFFFFFFF:0{width}x}")
    return ",".join(words)


def stamp(counter: bool) -> Callable[[int], str]:
    """A time stamp as tracefs prints it: a counter clock (x86-tsc) as its
    count, a clock in ns as seconds (to the ns, where the text gives µs)."""
    if counter:
        return str
    return lambda ns: f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


#: a buffer is read once it may be this full, by the rate it filled at before
FILL = 0.25
#: and at least this often, however slowly it fills
EVERY_S = 1.0


class CpuBuffers:
    """An instance's per-CPU buffers, open for the whole run: each drain
    reads the pages of the buffers that may hold a quarter of their size by
    now (by the rate each filled at), and every buffer at least once a
    second, without blocking; nothing is decoded while the run goes on. At
    384 CPUs a read of an empty buffer costs the reader 1.4 µs here: read
    every 50 ms, the buffers of quiet CPUs would take 1 % of a CPU."""

    def __init__(self, files: dict[int, Path], page_size: int, data_at: int = 16, buffer_bytes: int = 0) -> None:
        """`files`: each CPU's trace_pipe_raw."""
        cpus = sorted(files)
        self.page_size, self.data_at, self.buffer_bytes = page_size, data_at, buffer_bytes
        self.pages: dict[int, list[bytes]] = {cpu: [] for cpu in cpus}
        self.reads = 0  # read calls, for the reader's own account
        self._read_at = dict.fromkeys(cpus, time.monotonic())
        self._rate = dict.fromkeys(cpus, 0.0)  # bytes a second, as last seen
        self.fds: dict[int, int] = {}
        try:
            for cpu in cpus:
                self.fds[cpu] = os.open(files[cpu], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            self.close()
            raise

    def drain(self, everything: bool = True) -> int:
        """Bytes read: every page of each buffer due (`everything`: of all)."""
        got, now = 0, time.monotonic()
        for cpu, fd in self.fds.items():
            since = now - self._read_at[cpu]
            if not everything and since < EVERY_S and since * self._rate[cpu] < FILL * self.buffer_bytes:
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
        return got

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def layout(events_dir: Path) -> int | None:
    """Where a page's events begin, if its header is the ring buffer's as
    this reader knows it (a 64-bit time stamp, then an 8-byte commit word);
    None where it is not, and the merged text must be read instead."""
    try:
        text = (events_dir / "header_page").read_text()
    except OSError:
        return None
    fields = {m["decl"].split()[-1]: (int(m["off"]), int(m["size"])) for m in _FIELD_LINE.finditer(text)}
    if fields.get("timestamp") != (0, 8) or fields.get("commit") != (8, 8) or "data" not in fields:
        return None
    return fields["data"][0]


def formats(events_dir: Path, names: tuple[str, ...]) -> dict[int, Format]:
    """The formats of `names` (system/event) that exist, with the trace
    marker's and the stack's (ftrace/print, ftrace/kernel_stack)."""
    out: dict[int, Format] = {}
    for name in (*names, "ftrace/print", "ftrace/kernel_stack"):
        try:
            fmt = parse_format((events_dir / name / "format").read_text())
        except (OSError, ValueError):
            continue
        out[fmt.id] = fmt
    return out


def cmdlines(text: str) -> dict[int, str]:
    """tracefs's saved_cmdlines: `pid comm` a line."""
    out: dict[int, str] = {}
    for line in text.splitlines():
        pid, _, comm = line.partition(" ")
        if pid.isdigit() and comm:
            out[int(pid)] = comm
    return out


class Comms:
    """Task names by pid from tracefs's saved_cmdlines, read again (at most
    once a telling) only when a pid is not in what was read before."""

    def __init__(self, path: Path) -> None:
        self.path, self.names, self.fresh = path, dict[int, str](), False

    def __call__(self, pid: int) -> str | None:
        if pid not in self.names and not self.fresh:
            self.fresh = True
            with contextlib.suppress(OSError):
                self.names.update(cmdlines(self.path.read_text()))
        return self.names.get(pid)


def tell(pages: dict[int, list[bytes]], teller: Teller, counter: bool, comms: Callable[[int], str | None],
         data_at: int = 16) -> str:  # fmt: skip
    """Every CPU's pages as tracefs's text, in time order over the CPUs
    (as the merged trace_pipe gives them): `comm-pid [cpu] ts: event: ...`,
    a stack as `<stack trace>` and a `=> frame` line each. A task is named
    as the trace names it (switched, woken), else by `comms`."""
    when = stamp(counter)
    fmts, symbols = teller.formats, teller.symbols
    by_name = {f.name: f for f in fmts.values()}
    names = {0: "<idle>"}
    # Names the trace itself gives, before any line is told: a task first seen
    # as it is switched in has its name from that switch.
    named: dict[int, list[tuple[Value, Value]]] = {}  # event id -> (pid, comm) readers of the tasks it names
    for fmt, pairs in ((by_name.get("sched_switch"), (("prev_pid", "prev_comm"), ("next_pid", "next_comm"))),
                       (by_name.get("sched_waking"), (("pid", "comm"),))):  # fmt: skip
        if fmt is not None:
            named[fmt.id] = [(_reader(fmt.fields.get(p)), _reader(fmt.fields.get(c))) for p, c in pairs]
    streams = []
    for cpu, kept in sorted(pages.items()):
        recs = []
        for page in kept:
            for ts, at, length in events(page, data_at):
                if length >= 8:
                    recs.append((ts, cpu, page[at : at + length]))
        streams.append(recs)
    merged = list(heapq.merge(*streams, key=itemgetter(0)))
    for _, _, rec in merged:
        readers = named.get(rec[0] | rec[1] << 8)
        for pid_of, comm_of in readers or ():
            p, c = pid_of(rec), comm_of(rec)
            if isinstance(p, int) and isinstance(c, str) and p:
                names.setdefault(p, c)
    out: list[str] = []
    for ts, cpu, rec in merged:
        fmt = fmts.get(rec[0] | rec[1] << 8)
        if fmt is None:
            continue
        pid = _PID(rec, 4)[0]
        name = names.get(pid)
        if name is None:
            name = names[pid] = (comms(pid) or "<...>").translate(_CONTROLS)
        head = f"{name:>16}-{pid:<7} [{cpu:03d}] {when(ts)}:"
        if fmt.name == "print":  # in quietcore's own instance, only its trace_marker writes print events
            buf = _text(rec[16:].split(b"\0", 1)[0].rstrip(b"\n"))
            out.append(f"{head} tracing_mark_write: {buf}")
        elif fmt.name == "kernel_stack":
            out.append(f"{head} <stack trace>")
            size = _read(fmt.fields.get("size"), rec)
            frames = rec[16 : 16 + 8 * size] if isinstance(size, int) and size > 0 else rec[16:]
            for (addr,) in struct.iter_unpack("<Q", frames[: len(frames) // 8 * 8]):
                if addr == (1 << 64) - 1:
                    break
                out.append(f" => {symbols.name(addr)}")
        else:
            out.append(f"{head} {fmt.name}: {teller.body(fmt, rec)}")
    return "\n".join(out) + "\n" if out else ""

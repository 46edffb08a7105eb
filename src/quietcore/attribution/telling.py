"""Each CPU's raw pages (attribution.rawtrace) told as tracefs's text
lines, in time order over the CPUs, as the merged trace_pipe gives them:
each event by its format (attribution.eventformat), a task by its name, a
pointer by its kernel symbol, a stack a frame a line. The rest of quietcore
reads the trace as that text, however it was read."""

from __future__ import annotations

import bisect
import contextlib
import heapq
import re
import struct
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path

from quietcore.attribution.eventformat import (
    CONTROLS,
    INTS,
    Field,
    Format,
    Value,
    read_field,
    reader,
    text_of,
    uncast,
    value_of,
)
from quietcore.attribution.rawtrace import events

_PID = struct.Struct("<i").unpack_from


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
                slots.append((None, None, self._part(m, value_of(fmt, arg))))
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
            code += ("x" * (f.offset - end)) + (f"{f.size}s" if f.kind == "chars" else INTS[(f.size, f.signed)][1])
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
        field = re.fullmatch(r"REC->(\w+)", uncast(arg))
        f = fmt.fields.get(field.group(1)) if field else None
        if f is None:
            return None
        conv, width = m["conv"], m["width"]
        if f.kind == "chars" and conv == "s" and not width:
            return f, "%s", _chars
        if f.kind != "int" or (f.size, f.signed) not in INTS:
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
                parts.append(self._part(m, value_of(fmt, next(args, ""))))
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
    return text_of(value) if isinstance(value, bytes) else "?"


_MASK64 = (1 << 64) - 1
_EMPTY: Part = lambda rec: ""  # noqa: E731


def _constant(text: str) -> Part:
    return _EMPTY if not text else (lambda rec: text)


def stamp(counter: bool) -> Callable[[int], str]:
    """A time stamp as tracefs prints it: a counter clock (x86-tsc) as its
    count, a clock in ns as seconds (to the ns, where the text gives µs)."""
    if counter:
        return str
    return lambda ns: f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


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


#: Records told between two calls of tell's `progress`.
PROGRESS_EVERY = 1 << 16


def tell(pages: dict[int, list[bytes]], teller: Teller, counter: bool, comms: Callable[[int], str | None],
         data_at: int = 16, progress: Callable[[float], None] | None = None) -> str:  # fmt: skip
    """Every CPU's pages as tracefs's text, in time order over the CPUs
    (as the merged trace_pipe gives them): `comm-pid [cpu] ts: event: ...`,
    a stack as `<stack trace>` and a `=> frame` line each. A task is named
    as the trace names it (switched, woken), else by `comms`. `progress`:
    called with the share of the records told, every PROGRESS_EVERY of them
    (at 384 CPUs, 30 s of a node's events take a minute or more)."""
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
            named[fmt.id] = [(reader(fmt.fields.get(p)), reader(fmt.fields.get(c))) for p, c in pairs]
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
    for k, (ts, cpu, rec) in enumerate(merged):
        if progress is not None and k % PROGRESS_EVERY == 0:
            progress(k / len(merged))
        fmt = fmts.get(rec[0] | rec[1] << 8)
        if fmt is None:
            continue
        pid = _PID(rec, 4)[0]
        name = names.get(pid)
        if name is None:
            name = names[pid] = (comms(pid) or "<...>").translate(CONTROLS)
        head = f"{name:>16}-{pid:<7} [{cpu:03d}] {when(ts)}:"
        if fmt.name == "print":  # in quietcore's own instance, only its trace_marker writes print events
            buf = text_of(rec[16:].split(b"\0", 1)[0].rstrip(b"\n"))
            out.append(f"{head} tracing_mark_write: {buf}")
        elif fmt.name == "kernel_stack":
            out.append(f"{head} <stack trace>")
            size = read_field(fmt.fields.get("size"), rec)
            frames = rec[16 : 16 + 8 * size] if isinstance(size, int) and size > 0 else rec[16:]
            for (addr,) in struct.iter_unpack("<Q", frames[: len(frames) // 8 * 8]):
                if addr == (1 << 64) - 1:
                    break
                out.append(f" => {symbols.name(addr)}")
        else:
            out.append(f"{head} {fmt.name}: {teller.body(fmt, rec)}")
    return "\n".join(out) + "\n" if out else ""

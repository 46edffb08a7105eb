"""Trace events' records, as each event's tracefs `format` file lays them
out (Documentation/trace/events.rst, "Event formats"): their fields, their
print format and its arguments, and a field's value read from a record.
Only the shapes of argument that the events quietcore enables use are read
(a field, a string, a bitmask, a symbolic table, a choice of two); any
other reads as None, and is printed `?` (attribution.telling)."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: a value read from a record: a number, a text, or None where it cannot be
Value = Callable[[bytes], "int | str | None"]


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


FIELD_LINE = re.compile(r"field:\s*(?P<decl>[^;]+);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<s>\d)")


def parse_format(text: str) -> Format:
    """A tracefs `format` file (Documentation/trace/events.rst, "Event formats")."""
    name = re.search(r"^name:\s*(\S+)", text, re.M)
    ident = re.search(r"^ID:\s*(\d+)", text, re.M)
    if not name or not ident:
        raise ValueError("a format file without its name or ID")
    fields: dict[str, Field] = {}
    for m in FIELD_LINE.finditer(text):
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


def uncast(arg: str) -> str:
    """An argument without its cast: `(void *)REC->ip`, `(unsigned long long) REC->now`."""
    return re.sub(r"^\((?:\w+\s+)*\w+\s*\**\)\s*", "", arg.strip())


def value_of(fmt: Format, arg: str) -> Value:
    """The argument's value, from a record: the C expression's shapes the
    enabled events use; any other gives None, printed `?`."""
    arg = uncast(arg)
    field = re.fullmatch(r"REC->(\w+)", arg)
    if field:
        return reader(fmt.fields.get(field.group(1)))
    loc = re.fullmatch(r"__get_(str|cpumask|bitmask)\((\w+)\)", arg)
    if loc:
        word, bitmap = reader(fmt.fields.get(loc.group(2))), loc.group(1) != "str"
        return lambda rec: _loc(word(rec), rec, bitmap)
    table = re.fullmatch(r"__print_symbolic\(REC->(\w+),(.*)\)", arg, re.S)
    if table:
        key = reader(fmt.fields.get(table.group(1)))
        pairs = {_number(k): n for k, n in re.findall(r"\{\s*(-?\w+)\s*,\s*\"([^\"]*)\"\s*\}", table.group(2))}
        return lambda rec: pairs.get(k, str(k)) if isinstance(k := key(rec), int) else None
    choice = re.fullmatch(r"REC->(\w+)\s*\?\s*\"([^\"]*)\"\s*:\s*\"([^\"]*)\"", arg)
    if choice:
        test, yes, no = reader(fmt.fields.get(choice.group(1))), choice.group(2), choice.group(3)
        return lambda rec: yes if test(rec) else no
    return lambda rec: None


INTS = {(1, False): "<B", (1, True): "<b", (2, False): "<H", (2, True): "<h", (4, False): "<I", (4, True): "<i",
         (8, False): "<Q", (8, True): "<q"}  # fmt: skip


def reader(field: Field | None) -> Value:
    """A field's value from a record: a number, or a char[N]'s text."""
    if field is None:
        return lambda rec: None
    at, size = field.offset, field.size
    if field.kind == "chars":
        return lambda rec: text_of(rec[at : at + size])
    code = INTS.get((size, field.signed)) if field.kind in ("int", "loc") else None
    if code is None:
        return lambda rec: None
    unpack = struct.Struct(code).unpack_from
    return lambda rec: unpack(rec, at)[0] if at + size <= len(rec) else None


def _number(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def read_field(field: Field | None, rec: bytes) -> int | str | None:
    return reader(field)(rec)


def _loc(word: int | str | None, rec: bytes, bitmap: bool) -> str | None:
    """A __data_loc field: its word holds where the data is and its length."""
    if not isinstance(word, int):
        return None
    at, size = word & 0xFFFF, (word >> 16) & 0xFFFF
    data = rec[at : at + size]
    return _bitmap(data) if bitmap else text_of(data)


#: a task names itself (prctl PR_SET_NAME) with any bytes but NUL: a newline in
#: its name would start a line of its own making in the text told
CONTROLS = {c: "?" for c in (*range(32), 127)}


@lru_cache(maxsize=1 << 12)
def text_of(data: bytes) -> str:
    """A C string from a record, up to its NUL, with no control characters.
    Remembered: a trace names its few hundred tasks over and over (a switch
    two of them), and telling 107,000 records read 220,000 names here."""
    return data.split(b"\0", 1)[0].decode(errors="replace").translate(CONTROLS)


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

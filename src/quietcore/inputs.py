"""Every file quietcore takes from a user, read in one place and bounded, as
`outputs.py` is for what it writes: traces and peers' results to import,
plans, experiment files. A broken or hostile file gets one line and exit 2,
in bounded time and memory, before anything is stored or changed.

- Only a regular file is read. A FIFO, a device, a socket or a directory is
  refused before a byte is read: the file is opened with O_NONBLOCK (an open
  of a FIFO with no writer does not wait) and its type checked on the
  descriptor.
- As root, a symbolic link another user owns is not followed: its target
  could be a file only root may read, whose text an error would show. A
  user's quietcore follows links, as any of that user's programs would.
- Each kind has a size limit, said in the error and in docs/security.md:
  the size is checked before reading, and reading stops one chunk past it
  (a file can grow while it is read, and /proc files say 0).
- Text must be UTF-8, and a kind with lines has a longest line: a line
  without an end is an error at that length, not a buffer of the file.
- JSON deeper than MAX_DEPTH is refused before it is parsed (Python's
  parser recurses, and 100,000 `[` raised RecursionError); TOML's parser
  recurses too, and its RecursionError is said in one line as well."""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quietcore.errors import NotADatabase, UsageError

MiB = 1 << 20
#: Reads and a chunked kind's pieces: small enough that a signal is acted on between two (a chunk is parsed in
#: tens of milliseconds), large enough to cost nothing.
CHUNK = 8 * MiB
#: The deepest nesting of JSON arrays and objects read: a plan is 3 deep, a peer's result file 5.
MAX_DEPTH = 64


@dataclass(frozen=True)
class Kind:
    """What a file is to quietcore, and its bounds."""

    what: str  # "a plan", as the error says it: "over the 4 MiB a plan may be"
    max_bytes: int
    max_line: int | None = None  # bytes, newline aside; None: lines of any length (JSON, whose size is bounded)
    valid: str = ""  # what the option takes, said after every error: "a file from `quietcore tune plan --json`"
    nothing: str = ""  # what did not happen, said after the error: "nothing imported"


PLAN = Kind("a plan", 4 * MiB, valid="a file from `quietcore tune plan --json`", nothing="nothing changed")
EXPERIMENT = Kind("an experiment file", 1 * MiB, 64 << 10, "a TOML experiment file", "nothing run")
#: A quietcore results export (`results export --format json`): a session with its runs' events, as JSON.
EXPORT = Kind(
    "a results export",
    256 * MiB,
    valid="a file from `quietcore results export --format json`",
    nothing="nothing imported",
)
#: A peer's result file: JSON of one run, or a page of text (cyclictest's histogram of 384 CPUs is ~25 MB).
PEER = Kind("a result file", 64 * MiB, valid="the tool's own result file", nothing="nothing imported")
#: One CPU's trace, HOST-rankR-cpuC.trace: `start_ns<TAB>duration_ns` a line. Its size is bounded by the
#: measurement it says it is (trace_kind).
TRACE_LINE = 64
#: Gaps a second of measurement, at most: one every 5 µs all second long, far past any CPU measured (this VM
#: has about 1,000, a noisy GPU node's CPU 3,000).
TRACE_GAPS_PER_S = 200_000
#: A trace line as `results export` writes it is under 32 bytes; a file's bound is its lines at 64.
TRACE_MAX_BYTES = 1 << 30


_TRACE_VALID = "HOST-rankR-cpuC.trace files of start_ns<TAB>duration_ns lines"
TRACE = Kind("a trace file", TRACE_MAX_BYTES, TRACE_LINE, _TRACE_VALID, "nothing imported")


def trace_kind(duration_s: float | None) -> Kind:
    """A trace file's bounds: with --duration S, S seconds of gaps at TRACE_GAPS_PER_S, of TRACE_LINE bytes
    (1 s: 12 MiB), at least 1 MiB; without, TRACE_MAX_BYTES."""
    if duration_s is None:
        return TRACE
    limit = max(MiB, int(duration_s * TRACE_GAPS_PER_S * TRACE_LINE))
    return Kind(
        f"a trace file of {duration_s:g} s", min(limit, TRACE_MAX_BYTES), TRACE_LINE, _TRACE_VALID, "nothing imported"
    )


def _size(n: int) -> str:
    return f"{n / MiB:,.0f} MiB" if n >= MiB else f"{n:,} bytes"


class BadInput(UsageError):
    """A file quietcore will not read, or cannot parse: one line, exit 2."""


def _bad(option: str, path: Path, why: str, kind: Kind | None = None) -> BadInput:
    nothing = f", {kind.nothing}" if kind is not None and kind.nothing else ""
    valid = f" (valid: {kind.valid})" if kind is not None and kind.valid else ""
    return BadInput(f"{option} {path}: {why}{nothing}{valid}")


_TYPES = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))  # fmt: skip


def _not_regular(mode: int) -> str:
    kind = next((name for test, name in _TYPES if test(mode)), "not a regular file")
    return f"{kind}, not a regular file" if kind != "not a regular file" else kind


def open_regular(path: Path, option: str, kind: Kind | None = None) -> int:
    """A descriptor on `path`, a regular file, or BadInput naming why not. The caller closes it."""
    try:
        if os.geteuid() == 0:
            seen = os.lstat(path)
            if stat.S_ISLNK(seen.st_mode) and seen.st_uid != 0:
                raise _bad(option, path, f"a link owned by uid {seen.st_uid}, not root; give the file itself", kind)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _bad(option, path, "no such file", kind) from None
    except PermissionError:
        raise _bad(option, path, "permission denied", kind) from None
    except OSError as exc:
        raise _bad(option, path, exc.strerror or f"cannot be opened (errno {exc.errno})", kind) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _bad(option, path, _not_regular(mode), kind)
    return fd


def _too_big(option: str, path: Path, kind: Kind, size: int | None = None) -> BadInput:
    said = f"{_size(size)}, " if size is not None else ""
    return _bad(option, path, f"{said}over the {_size(kind.max_bytes)} {kind.what} may be", kind)


def read_bytes(path: Path, kind: Kind, option: str) -> bytes:
    """The whole file, at most kind.max_bytes."""
    return b"".join(chunks(path, kind, option))


def chunks(path: Path, kind: Kind, option: str) -> Iterator[bytes]:
    """The file in pieces of about CHUNK bytes, each ending at a line's end when the kind has lines (the last
    piece may lack one), checked against the kind's bounds as they are read."""
    fd = open_regular(path, option, kind)
    try:
        size = os.fstat(fd).st_size
        if size > kind.max_bytes:
            raise _too_big(option, path, kind, size)
        total, carry, line = 0, b"", 1
        while True:
            try:
                piece = os.read(fd, CHUNK)
            except OSError as exc:
                raise _bad(option, path, exc.strerror or "unreadable", kind) from None
            total += len(piece)
            if total > kind.max_bytes:
                raise _too_big(option, path, kind)
            if kind.max_line is None:
                if not piece:
                    return
                yield piece
                continue
            data = carry + piece
            end = data.rfind(b"\n") + 1 if piece else len(data)
            whole, carry = data[:end], data[end:]
            _check_lines(whole, carry, kind, line, option, path)
            if whole:
                line += whole.count(b"\n")
                yield whole
            if not piece:
                return
    finally:
        os.close(fd)


def _check_lines(whole: bytes, rest: bytes, kind: Kind, first: int, option: str, path: Path) -> None:
    """Every line of `whole`, and the unended `rest`, at most the kind's longest line."""
    longest = kind.max_line or 0
    if len(rest) > longest:
        at = first + whole.count(b"\n")
        raise _bad(option, path, f"line {at:,} is longer than {longest:,} bytes", kind)
    if len(whole) <= longest:
        return
    import numpy as np  # (here: `results list` and --help import this module, and numpy is 50 ms of them)

    ends = np.flatnonzero(np.frombuffer(whole, dtype=np.uint8) == 10)
    lengths = np.diff(ends, prepend=-1) - 1
    over = np.flatnonzero(lengths > longest)
    if over.size:
        raise _bad(option, path, f"line {first + int(over[0]):,} is longer than {longest:,} bytes", kind)


def read_text(path: Path, kind: Kind, option: str) -> str:
    """The file as UTF-8 text."""
    raw = read_bytes(path, kind, option)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise _bad(option, path, f"not UTF-8 text (line {line:,})", kind) from None


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text, strings aside: linear in its length."""
    raw = _STRING.sub(b'""', text.encode("utf-8"))
    if not raw:
        return 0
    import numpy as np

    steps = np.zeros(256, dtype=np.int8)
    steps[[ord("["), ord("{")]] = 1
    steps[[ord("]"), ord("}")]] = -1
    return int(np.cumsum(steps[np.frombuffer(raw, dtype=np.uint8)], dtype=np.int64).max(initial=0))


def parse_json(text: str, option: str, path: Path, kind: Kind | None = None) -> Any:
    """JSON text, its depth bounded; a decoding error said as its line and column."""
    deep = f"JSON nested deeper than {MAX_DEPTH} arrays and objects"
    if json_depth(text) > MAX_DEPTH:
        raise _bad(option, path, deep, kind)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(option, path, f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", kind) from None
    except ValueError:  # Python's own bound on an integer's digits (4,300), raised by the parser as it reads one
        raise _bad(option, path, "a number of more digits than Python reads", kind) from None
    except RecursionError:  # bounded above; kept so that no RecursionError reaches the user
        raise _bad(option, path, deep, kind) from None


def read_json(path: Path, kind: Kind, option: str) -> Any:
    return parse_json(read_text(path, kind, option), option, path, kind)


def read_toml(path: Path, kind: Kind, option: str) -> dict[str, Any]:
    """A TOML file, its errors said in one line."""
    text = read_text(path, kind, option)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _bad(option, path, f"not TOML: {exc}", kind) from None
    except RecursionError:
        raise _bad(option, path, "TOML nested deeper than Python's parser goes", kind) from None


def stored(text: str | bytes, what: str) -> Any:
    """JSON a database holds (a run's envelope, a session's facts): what quietcore wrote, or an error of one
    line, exit 2, where another hand made it (a database is input too). Not scanned for depth first, as a
    file is: a row is read often, and its RecursionError is caught all the same."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError, TypeError):
        raise NotADatabase(
            f"the database holds a {what} that is not JSON quietcore wrote (choose another with --db)"
        ) from None

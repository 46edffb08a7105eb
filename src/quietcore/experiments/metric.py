"""A workload's own figure of merit, read from its output as it runs.

`--metric NAME:REGEX[:higher|lower]` takes each match of the pattern's
first group as a sample; `--metric jmh` reads JMH's measurement
iterations (`Iteration   3: 297105.282 ops/s`), leaving out its warm-up
ones, with the fork each came from (`# Fork: 2 of 5`). A sample is
stamped with CLOCK_MONOTONIC_RAW as its line arrives, the clock the tracer's
marks carry, so that each sample's interval can be matched with what the
trace saw in it. The output is the workload's, so hostile: a value is a
number or refused with its line quoted, and lines are kept as text only to
be quoted, through safe.plain."""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from quietcore.errors import UsageError
from quietcore.safe import plain

DIRECTIONS = ("higher", "lower")
OF = ("median", "mean", "last")
TAIL_LINES = 20  # of the output, quoted when a pattern never matched
OUTPUT_KEPT = 256 * 1024  # bytes of a run's output stored with it (its first lines; the tail is kept besides)
LINE_MAX = 4096  # a longer line is cut there: a number is in a line's first few kB

# A number as programs print it: thousands separated by "," "_" or a (thin) space, a decimal point,
# an exponent; what follows it, up to the end, is its unit.
_NUMBER = re.compile(r"\s*([-+]?(?:\d{1,3}(?:[,_\u2009\u202f ]\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")
_JMH_FORK = re.compile(r"^# Fork: (\d+) of (\d+)")
_JMH_BENCHMARK = re.compile(r"^# Benchmark: (\S+)")
_JMH_ITERATION = re.compile(r"^Iteration\s+(\d+):\s+(.+?)\s*$")
_JMH_SCORE = re.compile(r"^([-+]?[\d.,]+(?:[eE][-+]?\d+)?|NaN)\s+(\S+)")


@dataclass(frozen=True)
class Metric:
    """A figure of merit: a pattern on the output, or JMH's iterations."""

    name: str
    pattern: str  # "" for jmh
    better: str | None = None  # None: from the unit (see direction)

    @property
    def jmh(self) -> bool:
        return not self.pattern

    def spec(self) -> str:
        return "jmh" if self.jmh else f"{self.name}:{self.pattern}" + (f":{self.better}" if self.better else "")


def parse_metric(text: str, option: str = "--metric") -> Metric:
    """A --metric value, checked before anything runs."""
    if text == "jmh":
        return Metric("score", "")
    name, sep, rest = text.partition(":")
    valid = f"NAME:REGEX[:{'|'.join(DIRECTIONS)}], or jmh"
    if not sep or not name.strip() or not rest:
        raise UsageError(f"invalid {option} {text!r} (expected {valid})")
    pattern, better = rest, None
    head, _, tail = rest.rpartition(":")
    if head and tail in DIRECTIONS:
        pattern, better = head, tail
    try:
        groups = re.compile(pattern).groups
    except re.error as exc:
        raise UsageError(f"invalid {option} {text!r}: the pattern is not a regular expression: {exc}") from None
    if groups < 1:
        raise UsageError(f"invalid {option} {text!r}: the pattern has no group: put the number in ( ), "
                         f"as in 'rate:([0-9.]+) MB/s' (expected {valid})")  # fmt: skip
    if not re.fullmatch(r"[A-Za-z0-9_.\- /%]+", name.strip()):
        raise UsageError(f"invalid {option} {text!r}: the name {name!r} holds characters other than letters, "
                         "digits, space and _ . - / %")  # fmt: skip
    return Metric(name.strip(), pattern, better)


def parse_metric_of(text: str, option: str = "--metric-of") -> str:
    if text not in OF:
        raise UsageError(f"invalid {option} {text!r} (valid: {', '.join(OF)})")
    return text


_TIME_UNITS = {"s", "ms", "us", "µs", "ns", "sec", "seconds", "min", "h"}


def direction(metric: Metric, unit: str) -> str:
    """Which way is better: as given; else lower for a time or a time per
    operation (s/op, ms, ns/op), higher for anything else (ops/s, MB/s, Gflops)."""
    if metric.better:
        return metric.better
    u = unit.strip().lower()
    return "lower" if u in _TIME_UNITS or u.endswith("/op") else "higher"


def number(text: str) -> tuple[float, str] | None:
    """A number and the unit after it ("297,105.282 ops/s" -> 297105.282,
    "ops/s"); None when the text does not begin with one."""
    m = _NUMBER.match(text)
    if not m:
        return None
    digits = re.sub(r"[,_\u2009\u202f ]", "", m.group(1))
    try:
        return float(digits), m.group(2)
    except ValueError:
        return None


@dataclass
class Sample:
    value: float
    unit: str
    at_ns: int  # CLOCK_MONOTONIC_RAW as its line arrived: the interval's end
    start_ns: int  # the interval's start: the sample before, or the run's start (jmh: the iteration before)
    fork: int | None = None
    iteration: int | None = None
    benchmark: str | None = None


class NotANumber(ValueError):
    """A capture that is not a number: the line is quoted."""


@dataclass
class Reader:
    """Lines of a workload's output in, samples out, as they come; `on_mark`
    is called in the reading thread at each interval's end (to read the
    host's steal then), and at the start."""

    metrics: tuple[Metric, ...]
    on_mark: Callable[[], int | None] | None = None  # read at the start and at each interval's end (the steal)
    started_ns: int = 0  # CLOCK_MONOTONIC_RAW as the workload started (begin)
    marks: dict[int, int | None] = field(default_factory=dict)  # on_mark's value at each such moment
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    errors: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # the output's first OUTPUT_KEPT bytes, stored with the run
    dropped: int = 0  # lines past those
    _kept_bytes: int = 0
    _fork: int | None = None
    _benchmark: str | None = None
    _iteration_ended: int | None = None  # jmh: the last (warm-up or measured) iteration's line

    def __post_init__(self) -> None:
        self._compiled = [(m, re.compile(m.pattern) if not m.jmh else None) for m in self.metrics]
        for m in self.metrics:
            self.samples.setdefault(m.name, [])

    def begin(self, at_ns: int | None = None) -> None:
        """The workload starts now (or at `at_ns`): its first interval's start, and the first mark."""
        self.started_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW) if at_ns is None else at_ns
        self.marks = {}
        self._mark(self.started_ns)

    def _mark(self, at: int) -> None:
        if self.on_mark is not None:
            self.marks[at] = self.on_mark()

    def line(self, raw: str, at_ns: int | None = None) -> None:
        text = raw.rstrip("\r\n")[:LINE_MAX]
        self.tail.append(text)
        if self._kept_bytes + len(text) < OUTPUT_KEPT:
            self.kept.append(text)
            self._kept_bytes += len(text) + 1
        else:
            self.dropped += 1
        at = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW) if at_ns is None else at_ns
        for metric, pattern in self._compiled:
            sample = self._jmh(text, at) if pattern is None else self._match(metric, pattern, text, at)
            if sample is not None:
                self.samples[metric.name].append(sample)
                if sample.at_ns not in self.marks:
                    self._mark(sample.at_ns)

    def _match(self, metric: Metric, pattern: re.Pattern[str], text: str, at: int) -> Sample | None:
        m = pattern.search(text)
        if not m or m.group(1) is None:
            return None
        parsed = number(m.group(1))
        if parsed is None:
            if len(self.errors) < 5:
                self.errors.append(f"--metric {metric.name}: {m.group(1)!r} is not a number, in the line "
                                   f"'{plain(text[:200])}'")  # fmt: skip
            return None
        before = self.samples[metric.name]
        return Sample(parsed[0], parsed[1], at, before[-1].at_ns if before else self.started_ns)

    def _jmh(self, text: str, at: int) -> Sample | None:
        # JMH prints "Iteration   3: " as the iteration begins and its score as it ends: the line arrives at
        # its end, so an iteration runs from the line of the one before (a warm-up's too) to its own.
        if m := _JMH_FORK.match(text):
            self._fork, self._iteration_ended = int(m.group(1)), at
            self._mark(at)
            return None
        if m := _JMH_BENCHMARK.match(text):
            self._benchmark, self._fork, self._iteration_ended = m.group(1), None, at
            return None
        if text.startswith("# Warmup Iteration"):
            self._iteration_ended = at
            self._mark(at)
            return None
        m = _JMH_ITERATION.match(text)
        if not m:
            return None
        start = self._iteration_ended if self._iteration_ended is not None else self.started_ns
        self._iteration_ended = at
        score = _JMH_SCORE.match(m.group(2))
        parsed = number(score.group(1)) if score else None
        if score is None or parsed is None:
            return None  # "≈ 10⁻⁵ s/op", too small to print: no figure to compare
        return Sample(parsed[0], score.group(2), at, start, self._fork, int(m.group(1)), self._benchmark)


def value_of(samples: list[Sample], of: str) -> float:
    values = [s.value for s in samples]
    if of == "mean":
        return statistics.fmean(values)
    if of == "last":
        return values[-1]
    return statistics.median(values)


def never_matched(metric: Metric, tail: deque[str], errors: list[str]) -> str:
    """The error of a pattern that matched nothing, with the output's end."""
    if errors:
        return errors[0]
    what = "JMH's 'Iteration N: SCORE UNIT' lines" if metric.jmh else f"the pattern {metric.pattern!r}"
    last = "\n".join(f"  | {plain(line)}" for line in tail) or "  (no output)"
    return f"--metric {metric.spec()}: {what} matched no line of the output; its last {len(tail)} lines:\n{last}"


def run_json(metrics: tuple[Metric, ...], output: Reader, of: str) -> dict[str, Any]:
    """A run's figures: every metric's value and samples, each sample with its
    interval (s from the start) and the host's steal in it (ms: on_mark reads
    /proc/stat's USER_HZ ticks); `intervals_ns`, the verdict metric's intervals
    in CLOCK_MONOTONIC_RAW, for the trace's account of each."""
    steal_scale = 1e9 / os.sysconf("SC_CLK_TCK")  # ns a tick
    figures, samples, missing = {}, {}, []
    for m in metrics:
        got = output.samples[m.name]
        if not got:
            missing.append(m.name)
            continue
        unit = got[0].unit
        figures[m.name] = {"unit": unit or m.name, "value": value_of(got, of), "better": direction(m, unit),
                           "samples": len(got)}  # fmt: skip
        rows = samples_json(got, output.started_ns)
        for row, s in zip(rows, got, strict=True):
            a, b = output.marks.get(s.start_ns), output.marks.get(s.at_ns)
            row["steal_ms"] = (b - a) * steal_scale / 1e6 if a is not None and b is not None else None
        samples[m.name] = rows
    first = output.samples[metrics[0].name]
    return {"metrics": figures, "samples": samples, "missing_metrics": missing,
            "intervals_ns": [[s.start_ns, s.at_ns] for s in first]}  # fmt: skip


def samples_json(samples: list[Sample], started_ns: int) -> list[dict[str, Any]]:
    """Each sample with its interval, in seconds from the workload's start."""
    return [{"value": s.value, "unit": s.unit, "fork": s.fork, "iteration": s.iteration, "benchmark": s.benchmark,
             "start_s": (s.start_ns - started_ns) / 1e9, "end_s": (s.at_ns - started_ns) / 1e9}
            for s in samples]  # fmt: skip


def pump(fd: int, reader: Reader, echo: int | None = None) -> None:
    """Read the workload's output from `fd` to its end, a line at a time into
    `reader` as each arrives (a full pipe would stop the workload); `echo`:
    a descriptor it is also written to as it comes (the user's terminal)."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # closed under it: a grandchild kept the pipe open
            break
        if not chunk:
            break
        if echo is not None:
            with contextlib.suppress(OSError):
                os.write(echo, chunk)
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            reader.line(line.decode(errors="replace"))
        if len(pending) > LINE_MAX:  # no newline for that long: take what came as a line
            reader.line(pending.decode(errors="replace"))
            pending = b""
    if pending:
        reader.line(pending.decode(errors="replace"))

"""The bulk-synchronous program at scale, simulated exactly (max-plus).

Each of N ranks repeats: compute a quantum of g ns of work, stretched by
the noise that falls in it, then a collective.
- global (allreduce, barrier): everyone leaves at the latest finish plus
  ceil(log2 N) rounds of (L + 2o);
- stencil: a rank waits for itself and its two neighbours on a ring, plus
  one round.
Each rank carries its own time from iteration to iteration, and so its own
place in its noise timeline: no formula per iteration.

The noise of a rank is a timeline of gaps (start, length) that repeats
with period T (a measured trace, wrapped as LogGOPSim's --noise-trace
does), read from its own offset. Work of g ns started at t ends at f, the
first time by which g ns have passed outside gaps: a gap under way at t
suspends it first, and each gap that starts before the (stretched) end
adds its length. Vectorised over ranks with numpy: one searchsorted per
pass."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

COLLECTIVES = ("allreduce", "barrier", "stencil")


@dataclass(frozen=True)
class Timeline:
    """Gaps within one period: starts ascending in [0, period), lengths."""

    starts: np.ndarray
    lengths: np.ndarray
    period: float

    def __post_init__(self) -> None:
        order = np.argsort(self.starts)
        object.__setattr__(self, "starts", np.asarray(self.starts, dtype=np.float64)[order])
        object.__setattr__(self, "lengths", np.asarray(self.lengths, dtype=np.float64)[order])
        object.__setattr__(self, "_cum", np.concatenate([[0.0], np.cumsum(self.lengths)]))

    @property
    def total(self) -> float:
        return float(self._cum[-1])  # type: ignore[attr-defined]

    def started_before(self, x: np.ndarray, side: str = "left") -> np.ndarray:
        """Total length of the gaps that start in [0, x), the timeline
        repeated: G(x), so the gaps starting in [a, b) total G(b) - G(a);
        side="right": those that start in [0, x]."""
        turns = np.floor(x / self.period)
        i = np.searchsorted(self.starts, x - turns * self.period, side="right" if side == "right" else "left")
        return np.asarray(turns * self.total + self._cum[i])  # type: ignore[attr-defined]

    def remaining(self, x: np.ndarray) -> np.ndarray:
        """How much of a gap under way at x is still to come (0 outside gaps)."""
        if self.starts.size == 0:
            return np.asarray(np.zeros_like(x))
        local = x - np.floor(x / self.period) * self.period
        i = np.searchsorted(self.starts, local, side="right") - 1
        prev_start = np.where(i >= 0, self.starts[i], self.starts[-1] - self.period)
        prev_len = self.lengths[i]  # i = -1 is the last gap, one period earlier
        return np.asarray(np.maximum(prev_start + prev_len - local, 0.0))


def union(starts: np.ndarray, lengths: np.ndarray, period: float) -> Timeline:
    """One timeline of gaps that may overlap (sources of a pattern, or of a
    trace with some taken out, then scaled): the CPU is lost while any gap
    is under way, so overlapping gaps are one. A gap running past the end
    of the period is cut where the next turn's first gap starts."""
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, dtype=np.float64)[order], (np.asarray(starts) + np.asarray(lengths))[order]
    if s.size == 0:
        return Timeline(s, s.copy(), period)
    reach = np.maximum.accumulate(e)
    first = np.concatenate([[True], s[1:] > reach[:-1]])  # a gap that starts after every earlier one ended
    merged_s, merged_e = s[first], np.maximum.reduceat(e, np.flatnonzero(first))
    merged_e[-1] = min(merged_e[-1], merged_s[0] + period)
    return Timeline(merged_s, merged_e - merged_s, period)


CHARGES = ("stretch", "window")


def finish(timeline: Timeline, t: np.ndarray, work: float, charge: str = "stretch") -> np.ndarray:
    """When work started at t (the ranks' own timeline times) ends. `charge`:
    stretch, the work runs until done through every gap it meets; window, as
    LogGOPSim charges an operation [t, t + work]: the rest of a gap under way
    at t, and every gap that starts inside that window, which is not
    stretched by the noise it adds (a gap that starts in the delay is not
    charged)."""
    if charge == "window":
        return np.asarray(t + work + timeline.remaining(t) + timeline.started_before(t + work)
                          - timeline.started_before(t, side="right"))  # fmt: skip
    begin = t + timeline.remaining(t)
    base = timeline.started_before(begin)
    delay = np.zeros_like(t)
    while True:  # the gaps that start in the stretched window stretch it further, until none is left
        longer = timeline.started_before(begin + work + delay) - base
        if np.array_equal(longer, delay):
            return np.asarray(begin + work + delay)
        delay = longer


@dataclass(frozen=True)
class Network:
    latency_ns: float = 1000.0  # L: one message across the machine (LogP), 1 µs
    overhead_ns: float = 200.0  # o: each send and receive
    per_byte_ns: float = 0.0  # G: each byte past a message's first (LogGP)
    bytes: int = 8  # each rank's message

    def rounds(self, ranks: int, collective: str) -> float:
        """The fast model's collective: ceil(log2 N) rounds (a stencil one) of L + 2o + (bytes - 1) G."""
        steps = 1 if collective == "stencil" else math.ceil(math.log2(ranks)) if ranks > 1 else 0
        return steps * (self.latency_ns + 2 * self.overhead_ns + (self.bytes - 1) * self.per_byte_ns)


def run(timelines: list[Timeline], assign: np.ndarray, offsets: np.ndarray, work: float, iterations: int,
        collective: str = "allreduce", network: Network | None = None, charge: str = "stretch") -> float:  # fmt: skip
    """The job's time for `iterations`, in ns, over its noiseless ideal:
    the slowdown. Rank r replays timelines[assign[r]] from offsets[r]."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")
    network = network or Network()
    ranks = assign.size
    cost = network.rounds(ranks, collective)
    now = np.zeros(ranks)  # the job's time, per rank
    for _ in range(iterations):
        done = np.empty(ranks)
        for k, timeline in enumerate(timelines):
            mine = assign == k
            local = now[mine] + offsets[mine]
            done[mine] = finish(timeline, local, work, charge) - offsets[mine]
        if collective == "stencil":
            now = np.maximum(np.maximum(np.roll(done, 1), np.roll(done, -1)), done) + cost
        else:
            now = np.full(ranks, done.max() + cost)
    return float(now.max()) / (iterations * (work + cost))


def max_of_iid(samples: np.ndarray, ranks: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """`draws` maxima of `ranks` independent draws from the empirical
    distribution of `samples`, each drawn at once: F^-1(U^(1/N))."""
    ordered = np.sort(samples)
    u = rng.random(draws) ** (1.0 / ranks)
    return np.asarray(ordered[np.minimum((u * ordered.size).astype(np.int64), ordered.size - 1)])

"""Real traces replayed on many CPUs, as bench/manycpu.py and bench/recall.py
replay them and the suite's tests of many CPUs do: each CPU's gaps are the
templates' pieces one after another, phase-shifted, and a train planted
on some is merged with the gaps it meets."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def replayed(templates: list[Array], cpus: int, span: float, seed: int = 24
             ) -> list[tuple[Array, Array]]:  # fmt: skip
    """`cpus` CPUs' (starts, lengths) over `span` ns from the templates' (start, length) pairs, each CPU's the
    templates' pieces one after another from its own, after pauses drawn from `seed`, phase-shifted by
    1.234567 ms a CPU. The last 50 ms are left empty: room for a host stall at the end."""
    pairs = pieces(templates, span)
    rng = np.random.default_rng(seed)
    out = []
    for cpu in range(cpus):
        parts, at, k = [], 0.0, cpu
        while at < span:
            p = pairs[k % len(pairs)]
            parts.append(np.column_stack([p[:, 0] + at, p[:, 1]]))
            at += float((p[:, 0] + p[:, 1]).max()) + float(rng.uniform(0.1e6, 10e6))
            k += 1
        joined = np.concatenate(parts)
        keep = joined[:, 0] < span - 50e6
        out.append((np.mod(joined[keep, 0] + cpu * 1_234_567.0, span - 50e6), joined[keep, 1]))
    return out


def pieces(templates: list[Array], span: float) -> list[Array]:
    """The templates, those longer than half the span in pieces of span / len(templates) ns (start, length
    pairs from 0): the first piece of each template, then the second of each, and so on. Whole, a template as
    long as the span would be a replayed CPU's whole trace, so the replay's CPUs would be of the template CPUs'
    kinds, a half of each: this VM's CPU 0 lost 1.66 times what its CPU 1 did (2026-11-27, 30 s: 1,078 and
    650 ms), and among CPUs of two such kinds no doubled loss stood out. Shorter templates, of which a CPU holds
    two or more (the GPU node's twelve of 10 s), are not cut: their replays are as they were."""
    longest = span / len(templates)
    cut: list[list[Array]] = []
    for p in templates:
        ends = p[:, 0] + p[:, 1]
        end = float(ends.max(initial=0.0))
        count = max(int(np.ceil(end / longest)), 1) if end > span / 2 else 1
        at = np.minimum(np.floor(p[:, 0] / longest), count - 1) if count > 1 else np.zeros(len(p))
        cut.append([p[at == i] - [i * longest, 0.0] for i in range(count)])
    return [c[i] for i in range(max(len(c) for c in cut)) for c in cut if i < len(c) and len(c[i])]


def merged(starts: Array, lengths: Array) -> tuple[Array, Array]:
    """Gaps in time order, those that overlap one gap: the probe sees one stretch where two meet."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], starts[order] + lengths[order]
    reach = np.maximum.accumulate(e)
    first = np.concatenate([[True], s[1:] > reach[:-1]])  # a gap that begins after all before it ended
    group = np.cumsum(first) - 1
    begin = s[first]
    end = np.maximum.reduceat(e, np.flatnonzero(first))
    assert len(begin) == group[-1] + 1
    return begin, end - begin


def with_train(gaps: tuple[Array, Array], span: float, hz: float, length: float, rng: np.random.Generator,
               jitter: float = 10e3) -> tuple[Array, Array]:  # fmt: skip
    """A CPU's gaps with a train of `hz` gaps of `length` ns planted among them over `span` ns (the last 50 ms
    left out, as replayed leaves them), at a phase drawn from `rng` and each `jitter` ns early or late at most."""
    period = 1e9 / hz
    at = rng.uniform(0, period) + np.arange(0.0, span - 50e6 - period, period)
    at = at + rng.uniform(-jitter, jitter, at.size)
    starts, lengths = gaps
    return merged(np.concatenate([starts, at]), np.concatenate([lengths, np.full(at.size, length)]))

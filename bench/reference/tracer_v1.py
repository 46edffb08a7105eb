"""The trace matching of quietcore 0.1 (commit abe4661), kept verbatim as
the reference the analysis benchmark checks the vectorised one against."""

from __future__ import annotations

import bisect
from typing import Any

from quietcore.attribution.tracer import Interval


def match_gaps(cpu: int, gaps: list[tuple[float, float]], spans: list[Interval]) -> dict[str, Any]:
    """Each traced span explains the part of a gap it overlaps; a gap counts
    once, for the span that overlaps it most. What no span covers (a whole
    gap, or the rest of one) is untraced time: in a VM, the host, which the
    guest cannot trace."""
    mine = sorted((s for s in spans if s.cpu == cpu), key=lambda s: s.start)
    starts = [s.start for s in mine]
    by_name: dict[str, list[float]] = {}
    untraced_gaps, untraced_ns = 0, 0.0
    for g_start, g_len in gaps:
        g_end = g_start + g_len
        k = bisect.bisect_left(starts, g_start - 1e7)  # spans start at most 10 ms before a gap they explain
        hits = [(s, min(s.end, g_end) - max(s.start, g_start)) for s in mine[k:] if s.start < g_end]
        hits = [(s, o) for s, o in hits if o > 0]
        if not hits:
            untraced_gaps += 1
            untraced_ns += g_len
            continue
        covered = min(sum(o for _, o in hits), g_len)
        untraced_ns += g_len - covered
        for s, o in hits:
            by_name.setdefault(s.name, [0.0, 0.0])[1] += o * covered / sum(o for _, o in hits)
        by_name[max(hits, key=lambda h: h[1])[0].name][0] += 1
    ranked = sorted(by_name.items(), key=lambda item: -item[1][1])
    sources = [{"name": n, "gaps": int(v[0]), "ns": v[1]} for n, v in ranked]
    return {"cpu": cpu, "sources": sources, "unmatched": {"gaps": untraced_gaps, "ns": untraced_ns}}

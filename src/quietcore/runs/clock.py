"""A rank's clock against rank 0's, as a survey stores it: an offset
estimate at the start and one at the end (survey.clock measures them by
ping-pong), and the mapping of a rank's times onto rank 0's clock that
reports draw with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Offset:
    at_ns: int  # rank 0's time of the estimate
    offset_ns: float  # the rank's clock minus rank 0's
    uncertainty_ns: float  # half the best round trip
    tries: int


def to_rank0(t_ns: Any, start: Offset, end: Offset) -> Any:
    """Times of the rank's clock (a number or a numpy array) on rank 0's,
    the offset interpolated linearly between the two estimates (drift)."""
    import numpy as np  # deferred (quietcore.lazy): the survey's kind is loaded to list sessions

    span = end.at_ns - start.at_ns
    if span <= 0:
        return t_ns - start.offset_ns
    weight = np.clip((np.asarray(t_ns, dtype=np.float64) - start.offset_ns - start.at_ns) / span, 0.0, 1.0)
    moved = t_ns - (start.offset_ns + weight * (end.offset_ns - start.offset_ns))
    return float(moved) if np.ndim(moved) == 0 else moved

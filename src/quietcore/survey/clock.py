"""A common clock for the ranks. MPI gives none (Open MPI leaves
MPI_WTIME_IS_GLOBAL unset), so rank 0 estimates each rank's offset by
ping-pong on CLOCK_MONOTONIC_RAW, the clock the probe records its origin
in: rank 0 stamps the send and the reply, the rank stamps its answer, and
offset = t_rank - (t_send + t_reply) / 2, good to half the round trip.
The shortest round trip wins; the exchange stops when STALE tries in a row
bring no shorter one (or after MAX_TRIES). Done at the start and the end
of the survey, the two estimates give each rank's drift, and a time of
that rank maps to rank 0's by interpolating between them."""

from __future__ import annotations

import time
from typing import Any

from quietcore.runs.clock import Offset, to_rank0

__all__ = ["Offset", "estimate", "now_ns", "to_rank0"]

STALE = 100
MAX_TRIES = 5000
TAG = 77


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)


def estimate(comm: Any) -> list[Offset]:
    """Collective: every rank calls it. Rank 0 gets one Offset per rank
    (its own is 0 ± 0); the others get []."""
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank != 0:
        while True:
            if comm.recv(source=0, tag=TAG) is None:
                return []
            comm.send(now_ns(), dest=0, tag=TAG)
    out = [Offset(now_ns(), 0.0, 0.0, 0)]
    for peer in range(1, size):
        best: tuple[int, float] | None = None  # (round trip, offset)
        stale = tries = 0
        while stale < STALE and tries < MAX_TRIES:
            tries += 1
            sent = now_ns()
            comm.send(True, dest=peer, tag=TAG)
            theirs = comm.recv(source=peer, tag=TAG)
            back = now_ns()
            trip = back - sent
            if best is None or trip < best[0]:
                best, stale = (trip, theirs - (sent + back) / 2), 0
            else:
                stale += 1
        assert best is not None
        out.append(Offset(now_ns(), best[1], best[0] / 2, tries))
    for peer in range(1, size):
        comm.send(None, dest=peer, tag=TAG)
    return out

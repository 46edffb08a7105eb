"""Gathering every rank's events to rank 0 as numpy buffers (Gatherv), in
rounds that each move fewer than 2**31 elements: MPI counts and
displacements are C ints, so one Gatherv of a larger job would overflow
them. Each round a rank sends at most LIMIT // size elements of what it
has left."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from quietcore.errors import UsageError

LIMIT = 2**31 - 1


def limit() -> int:
    """The elements one round may move; QUIETCORE_GATHER_LIMIT lowers it
    (the tests force several rounds with it). A value that is no positive
    whole number is refused in one line."""
    given = os.environ.get("QUIETCORE_GATHER_LIMIT")
    if given is None:
        return LIMIT
    # (at most 20 digits: int() refuses 4,300 and more with a ValueError of its own)
    if not (given.strip().isdigit() and len(given.strip()) <= 20 and int(given) >= 1):
        valid = "a whole number of elements, 1 or more"
        raise UsageError(f"invalid QUIETCORE_GATHER_LIMIT {given[:40]!r} (valid: {valid})")
    return min(LIMIT, int(given))


def gather_arrays(comm: Any, mine: np.ndarray) -> tuple[list[np.ndarray] | None, int]:
    """Collective. Rank 0 gets each rank's float64 array, in rank order
    (the others None), and every rank the rounds it took."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.ascontiguousarray(mine, dtype=np.float64)
    per_round = max(1, limit() // size)
    parts: list[list[np.ndarray]] = [[] for _ in range(size)]
    sent, rounds = 0, 0
    while True:
        chunk = data[sent : sent + per_round]
        counts = comm.gather(int(chunk.size), root=0)
        more = comm.bcast(any(counts) if rank == 0 else None, root=0)
        if not more:
            break
        rounds += 1
        if rank == 0:
            assert counts is not None
            displs = np.concatenate([[0], np.cumsum(counts[:-1])]).astype(np.int64)
            buf = np.empty(int(sum(counts)), dtype=np.float64)
            comm.Gatherv(chunk, [buf, counts, displs.tolist(), MPI.DOUBLE], root=0)
            for r in range(size):
                parts[r].append(buf[displs[r] : displs[r] + counts[r]].copy())
        else:
            comm.Gatherv(chunk, None, root=0)
        sent += chunk.size
    if rank != 0:
        return None, rounds
    return [np.concatenate(p) if p else np.empty(0) for p in parts], rounds

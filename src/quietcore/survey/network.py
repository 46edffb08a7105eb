"""The network between the ranks in LogGP's terms (L, o, G), measured by
ping-pong, for `simulate --network SESSION`.

Rank 0 and one peer (the first rank on another host, else rank 1):
- the round trip of a message of each size in SIZES, the fastest of REPS,
  the sizes taken in turn (one of each, then again) after a warm-up, so
  that a slow spell of the host falls on every size alike and not on the
  first: half of it is L + o_send + o_recv + (bytes - 1) G;
- o_send: how long a send of 8 bytes keeps the sender's CPU (the call,
  eager, returns once the message is on its way);
- o_recv: how long a receive of 8 bytes keeps the receiver's CPU when the
  message is already there (rank 0 waits a round trip's time first).
G is the slope of half the round trip against the size (least squares over
the sizes, on the relative error: the sizes span four orders of magnitude, and
an unweighted fit is the largest sizes' alone), L the intercept less o_send and o_recv (never below 0); the
round model's o is their mean. The fastest of many tries is the network's,
not the noise's (the method of Kielmann et al., "Fast measurement of LogP
parameters", and of Hoefler's Netgauge). Measured through mpi4py, as
`survey --coupled` communicates, so o includes Python's call: what that
measurement pays."""

from __future__ import annotations

import socket
import time
from typing import Any

import numpy as np

SIZES = (8, 64, 512, 4096, 32768, 131072)  # bytes
REPS = 200  # round trips per size: the fastest is kept
WARMUP = 20  # round trips of each size first, not timed
OVERHEAD_REPS = 500
TAG = 78


def peer_of(hosts: list[str]) -> int:
    """The first rank on another host than rank 0's, else rank 1."""
    return next((r for r, h in enumerate(hosts) if h != hosts[0]), 1)


def measure(comm: Any) -> dict[str, Any] | None:
    """Collective: every rank calls it. Rank 0 gets the network's
    parameters (None with one rank); the others None."""
    rank, size = comm.Get_rank(), comm.Get_size()
    hosts = comm.allgather(socket.gethostname())
    if size < 2:
        return None
    peer = peer_of(hosts)
    comm.Barrier()
    got = None
    if rank == 0:
        got = _lead(comm, peer)
        got["peer"] = f"{hosts[peer]}:{peer}"
        got["across_hosts"] = hosts[peer] != hosts[0]
    elif rank == peer:
        _follow(comm)
    comm.Barrier()
    return got


def _lead(comm: Any, peer: int) -> dict[str, Any]:
    bufs = [np.zeros(n, dtype=np.uint8) for n in SIZES]
    trips = [float("inf")] * len(SIZES)
    for rep in range(WARMUP + REPS):
        for i, buf in enumerate(bufs):
            t = time.perf_counter_ns()
            comm.Send(buf, dest=peer, tag=TAG)
            comm.Recv(buf, source=peer, tag=TAG)
            if rep >= WARMUP:
                trips[i] = min(trips[i], time.perf_counter_ns() - t)
    small = np.zeros(8, dtype=np.uint8)
    send = recv = float("inf")
    wait_ns = 2 * trips[0]  # the peer's answer is here by then: it takes a round trip
    for _ in range(OVERHEAD_REPS):
        t = time.perf_counter_ns()
        comm.Send(small, dest=peer, tag=TAG)
        send = min(send, time.perf_counter_ns() - t)
        ready = time.perf_counter_ns() + wait_ns
        while time.perf_counter_ns() < ready:
            pass
        t = time.perf_counter_ns()
        comm.Recv(small, source=peer, tag=TAG)
        recv = min(recv, time.perf_counter_ns() - t)
    comm.Send(np.zeros(0, dtype=np.uint8), dest=peer, tag=TAG + 1)  # done
    return fit(list(SIZES), trips, send, recv)


def _follow(comm: Any) -> None:
    from mpi4py import MPI

    bufs = [np.zeros(n, dtype=np.uint8) for n in SIZES]
    for _ in range(WARMUP + REPS):
        for buf in bufs:
            comm.Recv(buf, source=0, tag=TAG)
            comm.Send(buf, dest=0, tag=TAG)
    small = np.zeros(8, dtype=np.uint8)
    status = MPI.Status()
    while True:
        comm.Probe(source=0, tag=MPI.ANY_TAG, status=status)
        if status.Get_tag() != TAG:
            comm.Recv(np.zeros(0, dtype=np.uint8), source=0, tag=status.Get_tag())
            return
        comm.Recv(small, source=0, tag=TAG)
        comm.Send(small, dest=0, tag=TAG)


def fit(sizes: list[int], trips_ns: list[float], send_ns: float, recv_ns: float) -> dict[str, Any]:
    """L, o and G from the fastest round trips and the two overheads."""
    x = np.asarray(sizes, dtype=float) - 1
    half = np.asarray(trips_ns, dtype=float) / 2
    per_byte, intercept = np.polyfit(x, half, 1, w=1 / half)
    per_byte = max(float(per_byte), 0.0)
    latency = max(float(intercept) - send_ns - recv_ns, 0.0)
    residual = float(np.max(np.abs(half - (intercept + per_byte * x)) / half))
    return {"latency_ns": latency, "overhead_ns": (send_ns + recv_ns) / 2, "send_overhead_ns": float(send_ns),
            "recv_overhead_ns": float(recv_ns), "per_byte_ns": per_byte, "sizes": list(sizes),
            "half_round_trip_ns": half.tolist(), "fit_worst_ratio": residual}  # fmt: skip

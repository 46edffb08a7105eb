"""The round model: a collective as its real schedule of messages, in LogGP.

In every round a rank sends when its CPU is free (o ns of CPU, stretched
by the noise that falls in it), the message arrives L ns after the
sender's o, and the receiver spends o (stretched) once its own send is
done and the message is there, then G ns a byte past the first. A rank
inside a noise burst so delays its partner in that round, and the delay
spreads through the schedule (Ferreira et al., SC08; Hoefler et al.,
SC10), where the fast model (engine.run) charges a collective as a
noiseless cost after the slowest rank. The schedules:

- recursive doubling (allreduce, barrier): log2 P rounds of pairwise
  exchange; past the largest power of two, the extra ranks fold into a
  partner before and get the result after (MPICH's way);
- dissemination (barrier): in round k, rank r sends to r + 2^k and
  receives from r - 2^k;
- binomial (allreduce as a reduce to rank 0, then a broadcast from it);
- ring (allreduce of large messages: reduce-scatter, then allgather, each
  2 (P - 1) rounds of bytes / P; O(P) rounds, so O(P^2) work an iteration);
- neighbours (stencil): a halo to the right, then to the left.

The native core replays it (simulate_rounds.c, with a cursor per rank);
this numpy version, exact and plain, is what tests hold it to."""

from __future__ import annotations

import math

import numpy as np

from quietcore.simulate.engine import Network, Timeline, finish

ALGORITHMS = ("recursive-doubling", "dissemination", "binomial", "ring", "neighbours")
#: The algorithms each collective may use, its default first.
FOR_COLLECTIVE = {
    "allreduce": ("recursive-doubling", "binomial", "ring"),
    "barrier": ("dissemination", "recursive-doubling"),
    "stencil": ("neighbours",),
}


def rounds(algorithm: str, p: int) -> int:
    """Rounds of one collective over p ranks."""
    if algorithm == "recursive-doubling":
        pow2 = 1 << (p.bit_length() - 1)
        return int(math.log2(pow2)) + (2 if p > pow2 else 0)
    if algorithm == "dissemination":
        return math.ceil(math.log2(p)) if p > 1 else 0
    if algorithm == "binomial":
        return 2 * (math.ceil(math.log2(p)) if p > 1 else 0)
    if algorithm == "ring":
        return 2 * (p - 1)
    if algorithm == "neighbours":
        return 2 if p > 1 else 0
    raise ValueError(f"unknown algorithm {algorithm!r}")


def pairing(algorithm: str, p: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Whom each rank sends to and receives from in round k (-1: no one)."""
    r = np.arange(p, dtype=np.int64)
    to, frm = np.full(p, -1, dtype=np.int64), np.full(p, -1, dtype=np.int64)
    if algorithm == "recursive-doubling":
        pow2 = 1 << (p.bit_length() - 1)
        rem, last = p - pow2, rounds(algorithm, p) - 1
        if rem and k in (0, last):
            low = r < 2 * rem
            even = low & (r % 2 == 0)
            odd = low & (r % 2 == 1)
            if k == 0:  # fold in: even to odd
                to[even], frm[odd] = r[even] + 1, r[odd] - 1
            else:  # hand back: odd to even
                to[odd], frm[even] = r[odd] - 1, r[even] + 1
            return to, frm
        core = np.where(r < 2 * rem, np.where(r % 2 == 1, r // 2, -1), r - rem)
        step = k - 1 if rem else k
        mate = core ^ (1 << step)
        back = np.where(mate < rem, 2 * mate + 1, mate + rem)
        inside = core >= 0
        to[inside] = frm[inside] = back[inside]
    elif algorithm == "dissemination":
        d = (1 << k) % p
        to, frm = (r + d) % p, (r + p - d) % p
    elif algorithm == "binomial":
        m = math.ceil(math.log2(p)) if p > 1 else 0
        reduce = k < m
        mask = 1 << (k if reduce else 2 * m - 1 - k)
        bits = r & (2 * mask - 1)
        leaf, parent = bits == mask, (bits == 0) & (r + mask < p)
        if reduce:
            to[leaf], frm[parent] = r[leaf] - mask, r[parent] + mask
        else:
            frm[leaf], to[parent] = r[leaf] - mask, r[parent] + mask
    elif algorithm == "ring":
        to, frm = (r + 1) % p, (r + p - 1) % p
    elif algorithm == "neighbours":
        right, left = (r + 1) % p, (r + p - 1) % p
        to, frm = (right, left) if k == 0 else (left, right)
    else:
        raise ValueError(f"unknown algorithm {algorithm!r}")
    return to, frm


def message_bytes(algorithm: str, p: int, network: Network) -> int:
    """One message's size: the ring sends bytes / P a round."""
    return -(-network.bytes // p) if algorithm == "ring" else network.bytes


def run(timelines: list[Timeline], assign: np.ndarray, offsets: np.ndarray, work: float, iterations: int,
        algorithm: str, network: Network, quiet: bool = False, charge: str = "stretch") -> float:  # fmt: skip
    """The job's runtime in ns (quiet: without noise; charge: engine.finish's)."""
    p = assign.size
    extra = (message_bytes(algorithm, p, network) - 1) * network.per_byte_ns
    o, latency = network.overhead_ns, network.latency_ns
    schedule = [pairing(algorithm, p, k) for k in range(rounds(algorithm, p))]
    t = np.zeros(p)

    def busy(at: np.ndarray, mine: np.ndarray, w: float) -> np.ndarray:
        """When work of w ns that the ranks `mine` start at `at` ends."""
        if quiet:
            return at + w
        out = np.empty(at.size)
        for i, tl in enumerate(timelines):
            sel = assign[mine] == i
            out[sel] = finish(tl, at[sel] + offsets[mine][sel], w, charge) - offsets[mine][sel]
        return out

    everyone = np.arange(p)
    for _ in range(iterations):
        t = busy(t, everyone, work)
        for to, frm in schedule:
            ready = t.copy()
            send = np.flatnonzero(to >= 0)
            ready[send] = busy(t[send], send, o)
            recv = np.flatnonzero(frm >= 0)
            begin = np.maximum(ready[recv], t[frm[recv]] + o + latency)
            ready[recv] = busy(begin, recv, o) + extra
            t = ready
    return float(t.max())


def noiseless(p: int, work: float, iterations: int, algorithm: str, network: Network) -> float:
    """The job's runtime without noise, in ns: the schedule repeats from its
    second iteration on, so three iterations give the rest (as the kernel)."""
    none = [Timeline(np.empty(0), np.empty(0), 1.0)]
    zero = np.zeros(p, dtype=np.int64)
    first = min(iterations, 3)
    before = run(none, zero, np.zeros(p), work, first, algorithm, network, quiet=True)
    if first == iterations:
        return before
    after = run(none, zero, np.zeros(p), work, first + 1, algorithm, network, quiet=True)
    return after + (iterations - first - 1) * (after - before)

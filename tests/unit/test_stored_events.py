"""A noise run's events as the store keeps them (runs.events): exact, small, and refused when damaged."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from quietcore.runs.events import MAGIC, decode, encode


def test_events_come_back_bit_for_bit_in_under_half_their_json() -> None:
    rng = np.random.default_rng(7)
    # as the probe prints them: ten significant digits, random below
    starts = np.array([float(f"{x:.10g}") for x in np.sort(rng.uniform(0, 30e9, 20_000))])
    durations = np.array([float(f"{x:.10g}") for x in rng.lognormal(8, 1, 20_000)])
    blob = encode(starts, durations)
    back = decode(blob)
    assert np.array_equal(back[0], starts) and np.array_equal(back[1], durations)
    as_json = len(str([[s, d] for s, d in zip(starts.tolist(), durations.tolist(), strict=True)]))
    assert len(blob) < as_json / 2


def test_no_events_is_a_blob_too() -> None:
    starts, durations = decode(encode(np.zeros(0), np.zeros(0)))
    assert starts.size == 0 and durations.size == 0


@pytest.mark.parametrize(
    "blob",
    [
        b"QE1",  # short
        b"XXXX" + (1).to_bytes(4, "little") + zlib.compress(bytes(16)),  # not ours
        MAGIC + (2).to_bytes(4, "little") + zlib.compress(bytes(16)),  # fewer bytes than its count
        MAGIC + (1).to_bytes(4, "little") + zlib.compress(bytes(1 << 20)),  # more: never inflated past the count
        MAGIC + (1).to_bytes(4, "little") + b"not deflate",
    ],
)
def test_a_damaged_or_forged_blob_is_refused(blob: bytes) -> None:
    with pytest.raises(ValueError, match="stored events"):
        decode(blob)


def test_many_cpus_decode_in_threads_to_the_same_trace_and_a_damaged_one_is_named() -> None:
    """From THREADS_FROM CPUs on, a trace's blobs are decoded in threads: the same arrays, in the
    result's order; a damaged blob is a StoreError naming its CPU, as one by one."""
    from quietcore.errors import StoreError
    from quietcore.runs import events
    from quietcore.runs.trace import NoiseTrace

    rng = np.random.default_rng(3)
    n = events.THREADS_FROM + 3
    arrays = {cpu: (np.sort(rng.uniform(0, 1e9, 200)), rng.uniform(1e3, 1e5, 200)) for cpu in range(n)}
    result = {"mode": "spin", "threshold": {"ns": 500.0},
              "cpus": [{"cpu": cpu, "measured_ns": 1e9} for cpu in range(n)]}  # fmt: skip
    stored = {cpu: encode(*pair) for cpu, pair in arrays.items()}
    got = NoiseTrace.from_result(result, stored)
    assert got is not None and [c.cpu for c in got.cpus] == list(range(n))
    for c in got.cpus:
        assert np.array_equal(c.start_ns, arrays[c.cpu][0]) and np.array_equal(c.duration_ns, arrays[c.cpu][1])
    stored[7] = b"QE1"
    with pytest.raises(StoreError, match="CPU 7's stored events cannot be read"):
        NoiseTrace.from_result(result, stored)

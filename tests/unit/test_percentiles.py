from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quietcore.stats.percentiles import duration_summary, histogram_quantile, min_samples, quantile


def test_quantile_interpolates_like_numpy_default() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert quantile(values, 0.5) == 2.5
    assert quantile(values, 0.0) == 1.0
    assert quantile(values, 1.0) == 4.0
    assert quantile(values, 0.25) == pytest.approx(1.75)


def test_min_samples() -> None:
    assert [min_samples(q) for q in (0.5, 0.9, 0.95, 0.99, 0.999)] == [2, 10, 20, 100, 1000]


def test_small_samples_have_no_tail_percentiles() -> None:
    summary = duration_summary([5.0, 1.0, 3.0, 2.0, 4.0])
    assert summary["n"] == 5 and summary["max"] == 5.0
    assert summary["p50"] == 3.0
    assert summary["p90"] is None and summary["p99"] is None and summary["p999"] is None


def test_enough_samples_give_tail_percentiles() -> None:
    summary = duration_summary([float(i) for i in range(1, 101)])
    assert summary["p99"] == pytest.approx(99.01)
    assert summary["p999"] is None


@given(st.lists(st.floats(min_value=0, max_value=1e9, allow_nan=False), max_size=1500))
def test_summary_of_an_array_is_the_sorted_lists_to_the_bit(values: list[float]) -> None:
    """duration_summary finds only the order statistics it needs (np.partition), from a list or an
    array: the same numbers, exactly, as quantile() over the sorted list."""
    import numpy as np

    ordered = sorted(values)
    expected = {"n": len(values), "max": ordered[-1] if ordered else None} | {
        "p" + f"{q * 100:g}".replace(".", ""): quantile(ordered, q) if len(values) >= min_samples(q) else None
        for q in (0.5, 0.9, 0.99, 0.999)
    }
    assert duration_summary(values) == expected
    assert duration_summary(np.array(values)) == expected


def test_empty_summary() -> None:
    assert duration_summary([]) == {"n": 0, "max": None, "p50": None, "p90": None, "p99": None, "p999": None}


@pytest.mark.parametrize("q", [-0.1, 1.5])
def test_bad_quantile(q: float) -> None:
    with pytest.raises(ValueError):
        quantile([1.0], q)


def test_histogram_quantile() -> None:
    buckets = [[10.0, 11.0, 50], [20.0, 22.0, 50]]
    assert histogram_quantile(buckets, 0.5) == 11.0
    assert histogram_quantile(buckets, 0.75) == 21.0
    with pytest.raises(ValueError):
        histogram_quantile([], 0.5)


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=300), st.floats(0, 1))
def test_histogram_quantile_of_unit_buckets_brackets_the_exact_one(values: list[int], q: float) -> None:
    counts: dict[int, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    buckets = [[float(v), float(v + 1), c] for v, c in sorted(counts.items())]
    got = histogram_quantile(buckets, q)
    assert min(values) <= got <= max(values) + 1


def test_tail_refuses_a_p999_of_fewer_than_1000_values_and_agrees_with_quantile() -> None:
    import numpy as np

    from quietcore.stats.percentiles import tail

    rng = np.random.default_rng(5)
    assert tail(rng.exponential(size=999), 0.999) is None
    values = rng.exponential(size=5000)
    assert tail(values, 0.999) == pytest.approx(quantile(sorted(values.tolist()), 0.999), rel=1e-12)
    assert tail(list(values[:1000]), 0.999) is not None

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quietcore.facts.cpulist import format_cpulist, parse_cpulist, parse_cpumask


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0", {0}),
        ("0-3,8-11", {0, 1, 2, 3, 8, 9, 10, 11}),
        ("0-31:2/8", {0, 1, 8, 9, 16, 17, 24, 25}),
        ("2-3,6-7\n", {2, 3, 6, 7}),
        ("", set()),
        ("5,1,3", {1, 3, 5}),
    ],
)
def test_parse_cpulist(text: str, cpus: set[int]) -> None:
    assert parse_cpulist(text) == frozenset(cpus)


@pytest.mark.parametrize("text", ["1-", "-1", "3-1", "a", "1,,2", "0-7:0/4", "0-7:5/4", "0-7:2/0", "1 2"])
def test_parse_cpulist_rejects_malformed(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpulist(text)


@given(st.sets(st.integers(min_value=0, max_value=4095), max_size=200))
def test_cpulist_round_trip(cpus: set[int]) -> None:
    assert parse_cpulist(format_cpulist(cpus)) == frozenset(cpus)


@given(
    st.integers(min_value=0, max_value=500),
    st.integers(min_value=0, max_value=500),
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=1, max_value=16),
)
def test_group_syntax_matches_definition(first: int, span: int, used: int, group: int) -> None:
    used = min(used, group)
    last = first + span
    expected = {c for c in range(first, last + 1) if (c - first) % group < used}
    assert parse_cpulist(f"{first}-{last}:{used}/{group}") == frozenset(expected)


@pytest.mark.parametrize(
    ("mask", "cpus"),
    [
        ("3", {0, 1}),
        ("ffffffff,00000001", {0, *range(32, 64)}),
        ("00000000,00000000,00000100", {8}),
        ("f0\n", {4, 5, 6, 7}),
    ],
)
def test_parse_cpumask(mask: str, cpus: set[int]) -> None:
    assert parse_cpumask(mask) == frozenset(cpus)


@given(st.sets(st.integers(min_value=0, max_value=255)))
def test_cpumask_round_trip(cpus: set[int]) -> None:
    value = sum(1 << c for c in cpus)
    words = [f"{(value >> (32 * i)) & 0xFFFFFFFF:08x}" for i in reversed(range(8))]
    assert parse_cpumask(",".join(words)) == frozenset(cpus)


@pytest.mark.parametrize("mask", ["", "xyz", "1,,2", "123456789"])
def test_parse_cpumask_rejects_malformed(mask: str) -> None:
    with pytest.raises(ValueError):
        parse_cpumask(mask)

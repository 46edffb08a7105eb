from __future__ import annotations

import pytest

from quietcore.errors import UsageError
from quietcore.options import cpus_option, int_in_range, positive_float, tags_option

ONLINE = frozenset({0, 1})


def test_cpus_outside_online_name_valid_range() -> None:
    with pytest.raises(UsageError, match=r"invalid --cpus 9: not an online CPU \(valid: 0-1\)"):
        cpus_option("9", ONLINE)


@pytest.mark.parametrize("text", ["1-", "x", ""])
def test_malformed_cpus(text: str) -> None:
    with pytest.raises(UsageError, match=r"--cpus .*valid: 0-1"):
        cpus_option(text, ONLINE)


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "abc", "86401"])
def test_bad_duration(text: str) -> None:
    with pytest.raises(UsageError, match=r"invalid --duration .* \(valid: 0.001-86400\)"):
        positive_float(text, "--duration", 0.001, 86400)


def test_int_range_and_tags() -> None:
    assert int_in_range("5", "--n", 0, 10) == 5
    with pytest.raises(UsageError, match="valid: 0-10"):
        int_in_range("1.5", "--n", 0, 10)
    assert tags_option(["a=b", "c = d=e"]) == {"a": "b", "c": "d=e"}
    with pytest.raises(UsageError, match="KEY=VALUE"):
        tags_option(["novalue"])


def test_missing_arguments_are_named_with_the_values_they_take() -> None:
    from quietcore.cli import _Parser

    parser = _Parser(prog="quietcore x")
    parser.add_argument("mode", metavar="MODE", choices=("a", "b"))
    parser.add_argument("--level", choices=("1", "2"), required=True)
    parser.add_argument("path", metavar="PATH")
    with pytest.raises(UsageError) as one:
        parser.parse_args(["--level", "1"])
    # main prints it after "quietcore: error: ", so the command is named once: "x:", not "quietcore x:"
    assert str(one.value) == "x: the following arguments are required: MODE, PATH (valid: a, b)"
    with pytest.raises(UsageError) as both:
        parser.parse_args([])
    assert str(both.value) == (
        "x: the following arguments are required: MODE, --level, PATH (MODE: a, b) (--level: 1, 2)"
    )

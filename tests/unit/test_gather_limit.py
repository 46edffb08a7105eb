"""QUIETCORE_GATHER_LIMIT, an environment variable quietcore reads (issue 61: every input bounded): a value
that is no positive whole number is one line and exit 2, where int() raised ValueError."""

from __future__ import annotations

import pytest

from quietcore.errors import UsageError
from quietcore.survey.gather import LIMIT, limit


def test_the_limit_is_the_whole_number_given_or_mpi_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUIETCORE_GATHER_LIMIT", raising=False)
    assert limit() == LIMIT
    monkeypatch.setenv("QUIETCORE_GATHER_LIMIT", "1000")
    assert limit() == 1000
    monkeypatch.setenv("QUIETCORE_GATHER_LIMIT", str(LIMIT * 4))
    assert limit() == LIMIT


@pytest.mark.parametrize("given", ["", "0", "-5", "1e6", "NaN", "9" * 5000, "12 cats"])
def test_a_limit_that_is_no_positive_whole_number_is_refused(monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    monkeypatch.setenv("QUIETCORE_GATHER_LIMIT", given)
    with pytest.raises(UsageError, match=r"^invalid QUIETCORE_GATHER_LIMIT .* \(valid: a whole number") as err:
        limit()
    assert err.value.exit_code == 2 and "\n" not in str(err.value)

"""What every peer's parser returns, and the checks they share."""

from __future__ import annotations

import email.utils
from dataclasses import dataclass
from typing import Any

from quietcore.errors import UsageError
from quietcore.runs.model import Run


@dataclass(frozen=True)
class Imported:
    run: Run
    facts: dict[str, Any]  # what the file says of its node (kernel, host), under "imported"


def bad(name: str, why: str) -> UsageError:
    return UsageError(f"{name}: {why}, nothing imported")


def number(value: Any, name: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(name, f"{what} is not a number ({value!r})")
    return float(value)


def when(text: Any) -> str | None:
    """rt-tests' 'Tue, 24 Nov 2026 19:42:11 +0000' as ISO 8601, or None."""
    if not isinstance(text, str):
        return None
    try:
        return email.utils.parsedate_to_datetime(text).isoformat()
    except (TypeError, ValueError):
        return None

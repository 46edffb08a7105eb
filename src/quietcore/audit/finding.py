"""What a check returns: a status, the evidence read (value and where from),
the advice that fixes it (the exact command, write or boot parameter), and
what applying that advice needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    FAIL = "fail"
    WARN = "warn"
    OK = "ok"
    INFO = "info"
    UNKNOWN = "unknown"


#: The order findings are shown in: what to fix first.
ORDER = (Status.FAIL, Status.WARN, Status.OK, Status.INFO, Status.UNKNOWN)
NEEDS = ("root", "reboot", "hardware")


@dataclass(frozen=True)
class Evidence:
    source: str  # the file (as on the node: /proc/...) or command it came from
    value: str


@dataclass
class Finding:
    id: str
    status: Status
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)

    def see(self, source: str, value: object) -> Finding:
        """Add evidence; chainable."""
        self.evidence.append(Evidence(source, str(value).strip()))
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": [{"source": e.source, "value": e.value} for e in self.evidence],
            "advice": self.advice,
            "needs": self.needs,
        }

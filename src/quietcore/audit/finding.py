"""What a check returns: a status, the evidence read (value and where from),
and the actions that fix it, as data (see quietcore.actions): the advice
text is rendered from them, and what applying them needs is their union."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from quietcore.actions import NEEDS, Action, advice_lines


class Status(StrEnum):
    FAIL = "fail"
    WARN = "warn"
    OK = "ok"
    INFO = "info"
    UNKNOWN = "unknown"


#: The order findings are shown in: what to fix first.
ORDER = (Status.FAIL, Status.WARN, Status.OK, Status.INFO, Status.UNKNOWN)


def rank(status: str) -> int:
    """Position of a status (as stored text) in ORDER; unknown words last."""
    words = [s.value for s in ORDER]
    return words.index(status) if status in words else len(words)


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
    actions: list[Action] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)  # needs beyond the actions' (a reboot with no action)

    def see(self, source: str, value: object) -> Finding:
        """Add evidence; chainable."""
        self.evidence.append(Evidence(source, str(value).strip()))
        return self

    def act(
        self, kind: str, target: str, value: str = "", needs: tuple[str, ...] = ("root",), note: str = ""
    ) -> Finding:
        """Add an action that fixes this finding; chainable."""
        self.actions.append(Action(kind, target, value, needs, self.id, note))
        return self

    @property
    def advice(self) -> list[str]:
        return advice_lines(self.actions)

    @property
    def needs(self) -> list[str]:
        wanted = set(self.requires).union(*(a.needs for a in self.actions))
        return [n for n in NEEDS if n in wanted]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": [{"source": e.source, "value": e.value} for e in self.evidence],
            "advice": self.advice,
            "actions": [a.to_json() for a in self.actions],
            "needs": self.needs,
        }

"""A run: one measurement (a probe, a workload, a user's command, an
experiment's table, an audit), as measured and as stored. Measuring makes
one without a database; the store gives it its id and number in a session.
Its kind says which module of quietcore.report.kinds prints, reports and
exports it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from quietcore.inputs import stored
from quietcore.runs.analysis import NoiseAnalysis

if TYPE_CHECKING:  # numpy: only for runs whose trace is read, not for listing sessions
    from quietcore.runs.trace import NoiseTrace

STATUSES = ("complete", "interrupted")


def is_cell_run(params: Mapping[str, Any]) -> bool:
    """A run of an experiment's cell (a workload or a user's command): the
    one test of it, used by every layer."""
    return "cell" in params


#: Units a parameter's name ends with, as they are shown after its value.
_UNITS = {"_s": "s", "_ms": "ms", "_us": "µs", "_ns": "ns"}
#: Parameters whose numbers name something, written without a thousands separator: seed 2060267811.
_LABELS = ("seed", "pid", "id")


def params_text(params: Mapping[str, Any], cpus: Callable[[Any], str | None] | None = None) -> str:
    """A run's parameters as `name value unit`, comma-separated: what was left
    unset (None) and how a value was chosen (NAME_basis, quietcore's own
    provenance) are left out; they are in the JSON export. `cpus`: how a
    parameter of CPUs (`cpus`, `..._cpus`) is said, where it can be (else
    None, and it is said as any other)."""
    parts = []
    for key, value in params.items():
        if value is None or key.endswith("_basis"):
            continue
        unit = next((u for suffix, u in _UNITS.items() if key.endswith(suffix)), "")
        name = key[: -len(next(s for s in _UNITS if key.endswith(s)))] if unit else key
        of_cpus = cpus is not None and (key == "cpus" or key.endswith("_cpus"))
        if of_cpus and cpus is not None and (brief := cpus(value)) is not None:
            shown = brief
        elif isinstance(value, bool):
            shown = "yes" if value else "no"
        elif isinstance(value, int | float) and key.endswith(_LABELS):  # a seed, a pid: a label, not a quantity
            shown = str(value)
        elif isinstance(value, int | float):
            shown = f"{value:,g}" if isinstance(value, float) else f"{value:,}"
        elif isinstance(value, str):
            shown = value
        elif isinstance(value, dict):  # "analysed from session 1 run 2": a limit left unset, and a uuid, left out
            shown = " ".join(f"{k.replace('_', ' ')} {v}" for k, v in value.items() if v is not None and k != "uuid")
        else:
            shown = json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
        parts.append(f"{name.replace('_', ' ')} {shown}{' ' + unit if unit else ''}")
    return ", ".join(parts)


@dataclass
class Run:
    kind: str  # the probe subcommand, "exec", "experiment" or "audit"
    params: dict[str, Any]
    started: str
    ended: str
    envelope: dict[str, Any]
    text: str  # the envelope as the probe printed it: kept raw
    status: str = "complete"
    context: dict[str, Any] = field(default_factory=dict)
    analysis: dict[str, Any] = field(default_factory=dict)
    summary: list[dict[str, Any]] = field(default_factory=list)  # noise: one row per CPU
    # noise: each CPU's events as the store keeps them (runs.events), out of the envelope's pairs; or how
    # to read them when first wanted (`results show` of 27 million events needs none of them)
    stored: dict[int, bytes] = field(default_factory=dict)
    load_stored: Callable[[], dict[int, bytes]] | None = None
    #: noise: each CPU's (starts, durations), as the probe just gave them apart from its envelope
    #: (probes.noise.run_noise), until the store encodes them
    arrays: Mapping[int, Any] = field(default_factory=dict)
    id: int | None = None  # set by the store
    seq: int | None = None
    session_id: int | None = None

    @property
    def result(self) -> dict[str, Any]:
        value = self.envelope.get("result") or {}
        return value if isinstance(value, dict) else {}

    @property
    def is_cell(self) -> bool:
        return is_cell_run(self.params)

    @property
    def interrupted(self) -> bool:
        return self.status == "interrupted"

    @cached_property
    def trace(self) -> NoiseTrace | None:
        """The noise trace of a spin-mode noise run, decoded on first use."""
        from quietcore.runs.trace import NoiseTrace  # numpy: see quietcore.lazy

        if self.kind != "noise":
            return None
        if self.load_stored is not None and not self.stored:
            self.stored = self.load_stored()
        return NoiseTrace.from_result(self.result, self.stored, self.arrays)

    @property
    def spin_cpus(self) -> list[int] | None:
        """The CPUs of a spin-mode noise run (one with a trace), without decoding its events."""
        result = self.result
        if self.kind != "noise" or result.get("mode", "spin") != "spin" or "threshold" not in result:
            return None
        return [int(c["cpu"]) for c in result.get("cpus", [])]

    def full_envelope(self) -> dict[str, Any]:
        """The envelope with every CPU's events as pairs, as the probe wrote
        them (the store keeps them exactly): what an export holds."""
        if self.trace is None or not (self.stored or self.arrays):
            return self.envelope
        by_cpu = {c.cpu: c for c in self.trace.cpus}
        apart = set(self.stored) | set(self.arrays)
        cpus = [{**c, "events": by_cpu[int(c["cpu"])].pairs()} if int(c["cpu"]) in apart else c
                for c in self.result.get("cpus", [])]  # fmt: skip
        # the pairs are back in the envelope: not where the probe wrote them apart (--events-fd)
        result = {k: v for k, v in self.result.items() if k != "events_binary"}
        return {**self.envelope, "result": {**result, "cpus": cpus}}

    @cached_property
    def noise(self) -> NoiseAnalysis:
        """The analysis stored with a noise run, typed (empty for other kinds)."""
        return NoiseAnalysis.from_json(self.analysis if self.kind == "noise" else {})

    def to_dict(self, envelope: str | None = None) -> dict[str, Any]:
        """Plain JSON data, to hand a measured run to another process (a
        cluster rank to the one that writes the database): its envelope with
        its events as pairs where the probe gave them apart (`arrays`), or
        `envelope` (the text the caller put them in, or took them out of)."""
        if envelope is None:
            envelope = json.dumps(self.full_envelope()) if self.arrays else self.text
        return {"kind": self.kind, "params": self.params, "started": self.started, "ended": self.ended,
                "envelope": envelope, "status": self.status, "context": self.context, "analysis": self.analysis,
                "summary": self.summary}  # fmt: skip

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Run:
        if data.get("status") not in STATUSES:
            raise ValueError(f"not a run: status {data.get('status')!r} (valid: {', '.join(STATUSES)})")
        envelope = json.loads(data["envelope"])
        return Run(data["kind"], dict(data["params"]), data["started"], data["ended"], envelope, data["envelope"],
                   data["status"], dict(data["context"]), dict(data["analysis"]),
                   list(data["summary"]))  # fmt: skip

    def title(self, cpus: Callable[[Any], str | None] | None = None) -> str:
        """`run 1: noise: cpus 0-1, duration 2 s, mode spin ... (complete)`: its parameters as a person reads them
        (its CPUs as `cpus` says them: params_text)."""
        shown = params_text(self.params, cpus)
        return f"run {self.seq}: {self.kind}{': ' + shown if shown else ''} ({self.status})"

    @staticmethod
    def from_row(row: Mapping[str, Any], summary: list[dict[str, Any]]) -> Run:
        """A stored run, its JSON columns decoded once."""
        return Run(
            kind=row["kind"],
            params=stored(row["params"], "run's parameters"),
            started=row["started_at"],
            ended=row["ended_at"],
            envelope=stored(row["envelope"], "run's envelope"),
            text=row["envelope"],
            status=row["status"],
            context=stored(row["context"], "run's context"),
            analysis=stored(row["analysis"], "run's analysis"),
            summary=summary,
            id=row["id"],
            seq=row["seq"],
            session_id=row["session_id"],
        )


@dataclass(frozen=True)
class SessionRecord:
    """A stored session, its JSON columns (argv, facts, tags) decoded once,
    by the store, as Run.from_row decodes a run's."""

    id: int
    uuid: str
    command: str
    argv: list[str]
    host: str
    user: str | None
    pid: int | None
    started_at: str
    ended_at: str | None
    status: str
    tool_version: str
    fingerprint: str
    facts: dict[str, Any]
    tags: dict[str, str]
    error: str | None
    n_runs: int | None = None  # when the query counted them (results list)

    #: the fields of an export's "session" object, in its order
    EXPORTED = ("uuid", "command", "argv", "host", "user", "started_at", "ended_at", "status", "tool_version",
                "fingerprint", "facts", "tags", "error")  # fmt: skip

    @staticmethod
    def from_row(row: sqlite3.Row) -> SessionRecord:
        names = row.keys()
        return SessionRecord(
            id=int(row["id"]), uuid=row["uuid"], command=row["command"], argv=stored(row["argv"], "session's command"),
            host=row["host"], user=row["user"], pid=row["pid"], started_at=row["started_at"],
            ended_at=row["ended_at"], status=row["status"], tool_version=row["tool_version"],
            fingerprint=row["fingerprint"], facts=stored(row["facts"], "session's facts"),
            tags=stored(row["tags"], "session's tags"),
            error=row["error"], n_runs=int(row["n_runs"]) if "n_runs" in names else None,
        )  # fmt: skip

    def exported(self) -> dict[str, Any]:
        """The export's "session" object (schemas/results-v1)."""
        return {**{k: getattr(self, k) for k in self.EXPORTED}, "id": self.id}

"""One module per kind of run, each saying how its runs are summarised in
the terminal, in a report section, as rows of the flat export table, and as
JSON. Adding a kind: write its module (a subclass of base.Kind), list it in
KINDS below, and test it; nothing else dispatches on kinds."""

from __future__ import annotations

from quietcore.report.kinds import (
    audit,
    calibrate,
    cell,
    check,
    ctxswitch,
    experiment,
    intruders,
    job,
    latency,
    noise,
    peer,
    prove,
    simulate,
    survey,
)
from quietcore.report.kinds.base import Kind
from quietcore.runs.model import Run

KINDS: dict[str, Kind] = {k.name: k for k in (noise.KIND, latency.KIND, ctxswitch.KIND, calibrate.KIND,
                                              experiment.KIND, audit.KIND, prove.KIND, survey.KIND,
                                              simulate.KIND, intruders.KIND, check.KIND, job.KIND, peer.OSLAT,
                                              peer.CYCLICTEST, peer.RTLA)}  # fmt: skip
GENERIC = Kind()


def kind_of(run: Run) -> Kind:
    """The module that handles this run: an experiment's cell (whatever its
    workload) is one kind; the rest go by the run's kind."""
    if run.is_cell:
        return cell.KIND
    if run.params.get("tune") in ("before", "after"):  # a round of `tune prove`: its table stands for it
        return prove.Round(KINDS.get(run.kind, GENERIC))
    return KINDS.get(run.kind, GENERIC)

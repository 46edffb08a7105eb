"""One module per subcommand; each has NAME, add_arguments(parser) and
run(args) -> int, and its docstring is its --help."""

from __future__ import annotations

from types import ModuleType

from quietcore.commands import (
    audit,
    compare,
    ctxswitch,
    lab,
    latency,
    noise,
    report,
    results,
    run,
    simulate,
    snapshot,
    survey,
    tune,
)  # fmt: skip

COMMANDS: list[ModuleType] = [lab, audit, noise, latency, ctxswitch, run, compare, report, results, snapshot, tune,
                              survey, simulate]  # fmt: skip

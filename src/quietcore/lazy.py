"""The libraries quietcore imports only inside the functions that use them.

Every other import sits at the top of its module, where a linter sees the
arrow. These few are kept out because loading them costs more than some
commands take in all (matplotlib 0.3 s here), or
because they exist only for one command (mpi4py for `survey`, pyarrow for a
Parquet export). The rule covers our own modules that import one of them at
their top (`report.figures` loads matplotlib): those too are imported inside
functions. numpy (DEFERRED) may be loaded by a command's imports, and is
deferred where a command only reads. One more exception: `cli` imports the
command named, and what every command shares (`commands.common`), only once
it knows there is one, so that `--help` and `--version` load neither. A test
holds the code to these rules, and checks that `--help` loads nothing heavy
and `results list` no numpy.
"""

from __future__ import annotations

HEAVY: dict[str, str] = {
    "matplotlib": "the report's figures: about 0.3 s, and a font cache on first use",
    "jinja2": "the HTML report's templates",
    "mpi4py": "survey alone, and it starts MPI when loaded",
    "pyarrow": "the Parquet export alone (an optional dependency)",
    "jsonschema": "checking an export or an import against the schema",
    "prometheus_client": "--prometheus alone: 30 ms here (it loads http.server and wsgiref)",
}

#: Loaded by the commands that compute, at their import, but deferred where only reading
#: needs none: listing and showing sessions, the journal, the PM QoS holder (runs.model
#: decodes a run's trace, the one numpy part of a run, on first use).
DEFERRED: dict[str, str] = {
    "numpy": "about 50 ms here, a quarter of `results list`",
}

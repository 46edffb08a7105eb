"""What this node's noise would cost a bulk-synchronous job on many nodes.

  quietcore simulate (--trace SESSION[:CPU] | --pattern FREQ_HZ:DURATION_US[,...])
                     [--ranks 1k,10k,100k] [--granularity-us 10,100,1000]
                     [--collective allreduce|barrier|stencil] [--model rounds|fast] [--algorithm A]
                     [--network SESSION] [--iterations N] [--seed S]

Each of N ranks computes a quantum of g µs of work, stretched by the noise
that falls in it, then joins a collective. In the round model (the
default) the collective is its real schedule of messages (recursive
doubling, dissemination, binomial tree, ring, or a stencil's halo) in
LogGP: every send and receive needs the CPU for o, which noise stretches,
so a rank inside a burst delays its partners in that round. In the fast
model a collective is a noiseless cost after the slowest rank (ceil(log2
N) rounds of L + 2o): an optimistic bound; the study says where the two
differ. The job is replayed exactly, each rank at its own place in its own
noise timeline from iteration to iteration (max-plus, in the native core).

The noise is a measured trace from the store, every rank replaying it from
its own random offset and wrapping at its end (as LogGOPSim's
--noise-trace), or a synthetic pattern. Printed: the slowdown against N for
each g with a 95 % interval over --repeats seeds, the N at which noise costs
10 %, what each named source costs at --focus ranks, and what-ifs beside the
baseline: without each source (without the tick: what nohz_full would buy),
co-scheduled noise, gaps --scale times as long, and a 10x faster network.
The study is stored as a session; `quietcore report` draws it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quietcore import outputs
from quietcore.commands import common
from quietcore.errors import UsageError
from quietcore.facts.cpulist import cpus_phrase
from quietcore.options import int_in_range, positive_float, positive_floats_option, ranks_option
from quietcore.report import account, changes
from quietcore.report.kinds import simulate as kind
from quietcore.report.nodes import trace_text
from quietcore.report.progress import progress_bar
from quietcore.safe import write_atomic
from quietcore.simulate import noise as noises
from quietcore.simulate.engine import CHARGES, Network
from quietcore.simulate.rounds import FOR_COLLECTIVE
from quietcore.simulate.study import Options, study
from quietcore.store import db, sessions
from quietcore.store.sessions import now_iso

if TYPE_CHECKING:  # numpy: only when a study runs
    from quietcore.simulate.noise import Noise
    from quietcore.simulate.study import Options

NAME = "simulate"
COLLECTIVES = ("allreduce", "barrier", "stencil")
PHASES = ("random", "common")
MODELS = ("rounds", "fast")
MAX_RANKS = 10_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument("--trace", metavar="SESSION[:CPU]", help="a stored noise, lab or survey session's trace")
    noise.add_argument("--pattern", metavar="HZ:US[,...]", help="synthetic periodic noise, e.g. 250:17,100:200")
    parser.add_argument("--ranks", metavar="LIST", default="1k,10k,100k", help="N with k, M (default 1k,10k,100k)")
    parser.add_argument("--granularity-us", metavar="LIST", default="10,100,1000",
                        help="work quanta g in µs (default 10,100,1000)")  # fmt: skip
    parser.add_argument("--collective", default="allreduce", help="allreduce (default), barrier or stencil")
    parser.add_argument("--model", default="rounds",
                        help="rounds (default): every message of the collective; fast: a noiseless cost")  # fmt: skip
    parser.add_argument("--algorithm", metavar="A",
                        help="the collective's schedule. allreduce: recursive-doubling, the default, binomial "
                             "or ring; barrier: dissemination, the default, or recursive-doubling; stencil: "
                             "neighbours")  # fmt: skip
    parser.add_argument("--bytes", metavar="B", default="8", help="each rank's message in bytes (default 8)")
    parser.add_argument("--gap-per-byte-ns", metavar="G",
                        help="LogGP G: ns a byte past a message's first (default 0.1: 10 GB/s)")  # fmt: skip
    parser.add_argument("--network", metavar="SESSION",
                        help="L, o and G as a `survey` session measured them (instead of those options)")  # fmt: skip
    parser.add_argument("--iterations", metavar="N", default="1000", help="iterations per job (default 1000)")
    parser.add_argument("--noise-charge", metavar="HOW", default="stretch",
                        help="stretch (default): work runs through every gap it meets; window: as LogGOPSim charges "
                             "it, the gaps that start in the work's own length")  # fmt: skip
    parser.add_argument("--repeats", metavar="K", default="3", help="seeds per point, for the interval (default 3)")
    parser.add_argument("--seed", metavar="S", default="1", help="the first seed (default 1)")
    parser.add_argument("--phase", default="random", help="random (default): each rank its own offset; common")
    parser.add_argument("--latency-us", metavar="L", help="LogGP latency L of a message (default 1 µs)")
    parser.add_argument("--overhead-us", metavar="O", help="LogGP overhead o of a send or receive (default 0.2 µs)")
    parser.add_argument("--scale", metavar="F", default="0.5", help="what-if: every gap F times as long (default 0.5)")
    parser.add_argument("--focus", metavar="N", default="10k",
                        help="where sources and what-ifs are shown (default 10k, else the largest N)")  # fmt: skip
    parser.add_argument("--export-trace", metavar="DIR",
                        help="write the timelines as start_ns<TAB>duration_ns files (LogGOPSim)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the study as JSON")
    common.add_tags(parser)
    common.add_db(parser)


DEFAULT_NETWORK = {"latency_us": "1", "overhead_us": "0.2", "gap_per_byte_ns": "0.1"}


def options(args: argparse.Namespace, measured: dict[str, Any] | None = None) -> Options:
    """The validated study options, before anything is run; `measured`: the
    network of --network's survey, in place of L, o and G."""

    if args.collective not in COLLECTIVES:
        raise UsageError(f"invalid --collective {args.collective!r} (valid: {', '.join(COLLECTIVES)})")
    if args.phase not in PHASES:
        raise UsageError(f"invalid --phase {args.phase!r} (valid: {', '.join(PHASES)})")
    if not args.trace and not args.pattern and not args.network:
        raise UsageError("give the noise: --trace SESSION[:CPU] (a stored noise, lab or survey session) or "
                         "--pattern FREQ_HZ:DURATION_US[,...]")  # fmt: skip
    given = [f"--{k.replace('_', '-')}" for k in DEFAULT_NETWORK if getattr(args, k) is not None]
    if args.network and given:
        raise UsageError(f"--network sets L, o and G as the survey measured them: give it without {', '.join(given)}")
    focus = ranks_option(args.focus, "--focus", MAX_RANKS)
    if len(focus) != 1:
        raise UsageError(f"invalid --focus {args.focus!r} (valid: one number of ranks)")
    if args.model not in MODELS:
        raise UsageError(f"invalid --model {args.model!r} (valid: {', '.join(MODELS)})")
    if args.noise_charge not in CHARGES:
        raise UsageError(f"invalid --noise-charge {args.noise_charge!r} (valid: {', '.join(CHARGES)})")
    valid = FOR_COLLECTIVE[args.collective]
    if args.algorithm is not None and args.model == "fast":
        raise UsageError("--algorithm goes with --model rounds (the fast model has no schedule)")
    if args.algorithm is not None and args.algorithm not in valid:
        raise UsageError(f"invalid --algorithm {args.algorithm!r} for --collective {args.collective} "
                         f"(valid: {', '.join(valid)})")  # fmt: skip
    size = int_in_range(args.bytes, "--bytes", 1, 10**12)
    if measured is not None:
        network = Network(measured["latency_ns"], measured["overhead_ns"], measured["per_byte_ns"], size)
    else:
        text = {k: getattr(args, k) or v for k, v in DEFAULT_NETWORK.items()}
        network = Network(positive_float(text["latency_us"], "--latency-us", 0, 1e6) * 1e3,
                          positive_float(text["overhead_us"], "--overhead-us", 0, 1e6) * 1e3,
                          positive_float(text["gap_per_byte_ns"], "--gap-per-byte-ns", 0, 1e6), size)  # fmt: skip
    return Options(
        ranks=ranks_option(args.ranks, "--ranks", MAX_RANKS),
        granularities_us=positive_floats_option(args.granularity_us, "--granularity-us", 1e7),
        collective=args.collective,
        iterations=int_in_range(args.iterations, "--iterations", 1, 10_000_000),
        repeats=int_in_range(args.repeats, "--repeats", 1, 10),
        seed=int_in_range(args.seed, "--seed", 0, 2**31 - 1),
        network=network,
        common=args.phase == "common",
        scale=positive_float(args.scale, "--scale", 0.001, 100),
        focus=focus[0],
        model=args.model,
        algorithm=args.algorithm or valid[0],
        charge=args.noise_charge,
    )


def run(args: argparse.Namespace) -> int:
    options(args, {"latency_ns": 0, "overhead_ns": 0, "per_byte_ns": 0} if args.network else None)  # bad input first
    path, chosen = common.db_path(args)
    measured = None
    shares = None
    if args.trace or args.network:
        with db.open_db(path, chosen=chosen) as conn:
            if args.network:
                measured = noises.network_of(conn, args.network)
            if not args.pattern:  # --network alone: the survey's noise too, so one command predicts that cluster
                args.trace = args.trace or args.network
                noise = noises.from_session(conn, args.trace)
                shares = _shares(conn, args.trace)
    o = options(args, measured)
    if args.pattern:
        noise = noises.from_pattern(args.pattern, o.seed)
    if not noise.scaled_ok(o.scale):
        raise UsageError(f"invalid --scale {args.scale}: gaps {o.scale:g} times as long would take the whole CPU")
    if args.export_trace:
        export(noise, Path(args.export_trace))
    return _study(args, noise, o, path, chosen, shares)


def _shares(conn: Any, spec: str) -> dict[str, Any] | None:
    """The trace's session as lab, `results show` and audit say it: the tick's and the host's shares of
    the lost time of its CPUs (or of the CPU --trace names), one figure each (report.changes.Shares)."""
    session, cpu = noises.parse_trace(spec)
    row = sessions.find_session(conn, session)
    accounts = [a for r in sessions.runs_of(conn, row.id) if r.kind == "noise" for a in account.of_run(r).values()
                if cpu is None or a.cpu == cpu]  # fmt: skip
    if not accounts:
        return None
    virtual = bool((row.facts.get("virtualization") or {}).get("virtualized"))
    share = changes.shares(accounts, virtual)
    if not share.known:  # an imported trace: no counter or trace says what its gaps were
        return None
    return {
        "session": row.id,
        "cpus": cpus_phrase(frozenset(a.cpu for a in accounts)),
        "tick": share.tick,
        "host": share.host,
        "lost_ns": share.lost_ns,
        "virtualized": virtual,
    }


def _study(args: argparse.Namespace, noise: Noise, o: Options, path: Path, chosen: bool,
           shares: dict[str, Any] | None = None) -> int:  # fmt: skip
    from quietcore.session import Session

    params = {"noise": args.trace or args.pattern, "ranks": o.ranks, "granularity_us": o.granularities_us,
              "collective": o.collective, "iterations": o.iterations, "repeats": o.repeats, "seed": o.seed,
              "phase": args.phase, "latency_us": o.network.latency_ns / 1e3, "overhead_us": o.network.overhead_ns / 1e3,
              "gap_per_byte_ns": o.network.per_byte_ns, "bytes": o.network.bytes, "model": o.model,
              "algorithm": o.algorithm if o.model == "rounds" else None, "scale": o.scale,
              "network": args.network}  # fmt: skip
    # The session first: a database that cannot be written fails before the
    # study (half a minute by default, more at scale), not after it, and the
    # session starts when the study does.
    with Session("simulate", path, chosen, common.tags(args), common.live_root()) as session:
        started = now_iso()
        with progress_bar(1.0, enabled=not args.json) as update:
            result = study(noise, o, update)
        if shares is not None:
            result["shares"] = shares
        session.record("simulate", params, started, {}, result)
        session_id = session.id
    if args.json:
        print(json.dumps({"session": session_id, "params": params, **result}, indent=2))
    else:
        kind.show(result, params)
        print(f"Stored as session {session_id}; `quietcore report {session_id}` draws it.", file=sys.stderr)
    return 0


def export(noise: Noise, out: Path) -> None:
    """Each replayed timeline as start_ns<TAB>duration_ns lines, into DIR."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--export-trace {out} is a file (valid: a directory, made if missing)")
    out = outputs.directory(out, "--export-trace")

    for k, tl in enumerate(noise.timelines()):
        write_atomic(out / f"simulated-{k}.trace", trace_text(tl.starts, tl.lengths))
    print(f"wrote {len(noise.traces)} traces in {out}", file=sys.stderr)

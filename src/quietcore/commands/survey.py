"""Measure every node of an MPI job at once: start under mpirun or srun.

  mpirun -n N quietcore survey [--mode spin|fwq|ftq] [--duration S] [--out DB]
  srun -n N --cpu-bind=cores quietcore survey [...]

Each rank finds its CPUs (its affinity, as the launcher bound it) and
measures noise on them at the same moment as every other rank, after a
barrier, with the analysis done on its own node. Rank 0 estimates each
rank's clock offset by ping-pong before and after, gathers every node's
summary and events, and alone writes one session with a run per rank.
Rank 0 also measures the network to one other rank (LogGP's L, o and G, by
ping-pong over message sizes: `simulate --network SESSION` uses them). It
then names the odd nodes (see `quietcore.survey.odd` for the rule) and the
configuration fields in which nodes differ from the majority. Without a
launcher it is a one-rank survey of this node, and says so.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any

from quietcore.commands import common
from quietcore.errors import UsageError
from quietcore.options import duration_option, int_in_range
from quietcore.survey import coupled, network, node

NAME = "survey"
MODES = ("spin", "fwq", "ftq")
LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS", "MPI_LOCALNRANKS")
INSTALL = ("quietcore survey needs mpi4py and an MPI library: pip install 'quietcore[mpi]' "
           "(and, on Debian, apt-get install openmpi-bin libopenmpi-dev)")  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", default="spin", help="spin (default), fwq or ftq: as `quietcore noise`")
    parser.add_argument("--duration", metavar="S", default="10", help="seconds of noise on every rank (default 10)")
    parser.add_argument("--max-events", metavar="N", default="100000",
                        help="events each rank keeps per CPU and sends to rank 0 (default 100000)")  # fmt: skip
    parser.add_argument("--send-events", metavar="N", default="20000",
                        help="events each rank sends to rank 0, its longest (default 20000): rank 0 holds "
                        "ranks x N x 24 bytes")  # fmt: skip
    parser.add_argument(
        "--coupled",
        action="store_true",
        help="then measure the slowdown of a work quantum + Allreduce on 1, 2, 4, ... ranks",
    )
    parser.add_argument(
        "--work-us",
        metavar="LIST",
        default="10,100,1000",
        help="--coupled: the work quanta in µs (default 10,100,1000)",
    )
    parser.add_argument(
        "--audit",
        action="store_true",
        help="also audit every node; findings that differ between nodes are listed once, with them",
    )
    parser.add_argument("--out", metavar="DB", help="the results database rank 0 writes (as --db)")
    common.add_prometheus(parser)
    parser.add_argument("--json", action="store_true", help="rank 0 prints the survey as JSON")
    common.add_tags(parser)
    common.add_db(parser)


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise UsageError(INSTALL) from exc
    except RuntimeError as exc:  # mpi4py is there, the library it loads at import is not
        first = str(exc).splitlines()[0] if str(exc) else "cannot load the MPI library"
        raise UsageError(f"{first}: {INSTALL}") from exc
    return MPI


def run(args: argparse.Namespace) -> int:
    if args.mode not in MODES:
        raise UsageError(f"invalid --mode {args.mode!r} (valid: {', '.join(MODES)})")
    duration = duration_option(args.duration, lo=0.2, hi=3600)
    max_events = int_in_range(args.max_events, "--max-events", 100, 10_000_000)
    send = int_in_range(args.send_events, "--send-events", 0, 100_000_000)
    try:
        work_us = [int(w) for w in args.work_us.split(",")]
    except ValueError:
        work_us = []
    if not work_us or not all(1 <= w <= 1_000_000 for w in work_us):
        raise UsageError(f"invalid --work-us {args.work_us!r} (valid: µs from 1 to 1000000, comma-separated)")
    metrics = common.prometheus_dir(args)  # each rank, of its own node
    if args.out:
        args.db = args.out
    MPI = _mpi()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    tasks = os.environ.get("SLURM_NTASKS")
    if tasks and tasks.isdigit() and int(tasks) != size:
        # srun without a matching PMI starts N singletons, each a world of one: refuse, on every rank.
        raise UsageError(f"srun started {tasks} tasks but MPI sees a world of {size}: the launcher and the MPI "
                         "library do not share a PMI (with Debian's Open MPI: srun --mpi=pmix, or start with "
                         "mpirun inside the allocation)")  # fmt: skip
    if size == 1 and not any(v in os.environ for v in LAUNCHER_VARS) and rank == 0:
        alone = (
            "quietcore survey: no MPI launcher: a one-rank survey of this node "
            "(run it as `mpirun -n N quietcore survey` or `srun -n N quietcore survey`)"
        )
        print(alone, file=sys.stderr)

    mine = node.measure(comm, args.mode, duration, max_events, send, keep=metrics is not None)
    if metrics is not None:
        written = node.publish(comm, mine, metrics)
        if written:
            print(f"quietcore survey: metrics of {socket.gethostname()} for node_exporter: {written}", file=sys.stderr)
    if args.audit:
        hosts = comm.allgather(mine.payload["place"]["host"])
        if hosts.index(hosts[rank]) == rank:  # one audit per node: its first rank's
            mine.payload["audit"] = node.audit_of()
    mine.network = network.measure(comm)
    if args.coupled:
        mine.coupled = coupled.measure(comm, work_us)
        if rank == 0 and mine.trace is not None:
            coupled.predict(mine.coupled, *mine.trace)
            coupled.simulate(mine.coupled, *mine.trace, mine.network)
    out = node.collect(comm, mine)
    if rank != 0:
        return 0 if mine.error is None else 1
    assert out is not None
    session_id, survey = node.store(common.db_path(args), common.tags(args), out)
    if args.json:
        print(json.dumps({"session": session_id, **survey}, indent=2))
    else:
        node.show(session_id, survey)
    return 0 if not survey["failed"] else 1

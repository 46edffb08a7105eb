"""How quietcore's output reads, as issue 56 measured it: the README tour's
commands, with short durations, each run three ways: its standard output
in a file (as a Slurm batch job keeps it), and in a real terminal (tmux)
of 120 and of 80 columns. For each command and way it prints the lines,
the longest line, the lines over 120 characters that are not a command
or a path, the numbers the terminal split across rows, the cells cut
with an ellipsis, the sentences over 40 words and the parentheses inside
parentheses, with PASS or MISS against the issue's "done when".

    python bench/readout.py [--only lab,noise] [--keep DIR]

Each way runs in a database of its own. Needs tmux; root for the traced
commands. About 6 minutes here."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests")]
from readable import Reading, read  # noqa: E402

QC = f"{shlex.quote(sys.executable)} -m quietcore"
BENCH = "s = 0\nfor i in range(1_500_000):\n    s += i\n"

#: The commands run beside a neighbour on CPU 1 (2 ms of every 10), as the README's tour runs them.
NEIGHBOURED = ("run custom", "intruders")
#: name, the command after `quietcore`. {last}: the newest session; {lab}: the lab's.
TOUR = (
    ("lab", "lab --quick"),
    ("noise", "noise --cpus 1 --duration 3"),
    ("explain", "noise --cpus 1 --duration 5 --explain-above 100"),
    ("audit", "audit"),
    ("run custom", "run custom --cmd 'python3 {bench}' --factor cpus=1 --factor shield=off,1 --reps 3"),
    ("results show", "results show {last}"),
    ("results list", "results list"),
    ("intruders", "intruders --cpus 1 -- python3 {bench}"),
    ("tune plan", "tune plan"),
    ("simulate", "simulate --trace {lab} --ranks 1k,10k --repeats 2"),
    ("check", "check --cpus 1"),
    ("compare", "compare {lab} {last}"),
    ("report", "report {lab}"),
)


@dataclass
class Way:
    name: str
    columns: int | None  # None: a file


def newest(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT max(id) FROM sessions").fetchone()[0] or 0)


def in_file(command: str, env: dict[str, str]) -> str:
    proc = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, check=False)
    return proc.stdout + proc.stderr


def in_tmux(command: str, env: dict[str, str], columns: int) -> str:
    """What a terminal of `columns` shows, each line whole: a line it wrapped is one line, longer than `columns`."""
    sock = f"qcread{os.getpid()}-{columns}-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", sock]
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k.startswith(("QUIETCORE", "XDG")))
    script = f"export {exports}; {command}; echo __END__; sleep 600"
    subprocess.run([*tmux, "-f", "/dev/null", "new-session", "-d", "-x", str(columns), "-y", "50", "-s", "r"],
                   check=True, env={**env, "TERM": "xterm-256color"})  # fmt: skip
    try:
        subprocess.run([*tmux, "set-option", "-g", "history-limit", "100000"], check=True)
        subprocess.run([*tmux, "respawn-pane", "-k", "-t", "r", "bash", "-c", script], check=True)
        while True:
            time.sleep(0.5)
            rows = subprocess.run([*tmux, "capture-pane", "-p", "-S", "-", "-E", "-", "-t", "r"], capture_output=True,
                                  text=True, check=True).stdout  # fmt: skip
            if "__END__" in rows:
                break
        joined = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", "r"],
                                capture_output=True, text=True, check=True).stdout  # fmt: skip
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
    return joined[: joined.index("__END__")].rstrip("\n")


@contextlib.contextmanager
def neighbour(wanted: bool) -> Iterator[None]:
    """The probe's disturber on CPU 1, 2 ms of every 10, for the block, if `wanted`."""
    if not wanted:
        yield
        return
    sys.path[:0] = [str(Path(__file__).resolve().parent)]
    from load import disturbed

    with disturbed("1", 3600, 10_000, 2_000):
        yield


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="the tour's commands to run, by name, comma-separated")
    parser.add_argument("--keep", type=Path, help="write each output to DIR/NAME.WAY.txt")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("readout: needs tmux")
    only = set(args.only.split(",")) if args.only else None
    work = Path(tempfile.mkdtemp(prefix="qc-readout-"))
    (work / "bench.py").write_text(BENCH)
    ways = (Way("file", None), Way("120 cols", 120), Way("80 cols", 80))
    results: list[tuple[str, str, Reading]] = []
    try:
        for way in ways:
            data = work / way.name.replace(" ", "")
            data.mkdir()
            env = {**os.environ, "XDG_DATA_HOME": str(data), "QUIETCORE_DB": str(data / "results.db"),
                   "QUIETCORE_STATE_DIR": str(data / "state")}  # fmt: skip
            env.pop("COLUMNS", None)
            lab = 0
            for name, tail in TOUR:
                last = newest(data / "results.db") if (data / "results.db").exists() else 0
                command = f"{QC} {tail.format(bench=work / 'bench.py', last=last, lab=lab)}"
                if only is None or name in only or name == "lab":
                    with neighbour(name in NEIGHBOURED):
                        text = in_file(command, env) if way.columns is None else in_tmux(command, env, way.columns)
                    if name == "lab":
                        lab = newest(data / "results.db")
                    if only is None or name in only:
                        results.append((name, way.name, read(text, way.columns)))
                        if args.keep:
                            args.keep.mkdir(parents=True, exist_ok=True)
                            (args.keep / f"{name.replace(' ', '-')}.{way.name.replace(' ', '')}.txt").write_text(text)
                        print(f"  {name:<13} {way.name:<9} {results[-1][2].line()}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summary(results)


def summary(results: list[tuple[str, str, Reading]]) -> int:
    print()
    print(f"{'command':<13} {'lines':>5} {'longest':>7} {'>120':>4} {'split@120':>9} {'cut@80':>6} {'>40 words':>9} "
          f"{'((':>3}")  # fmt: skip
    by_name: dict[str, dict[str, Reading]] = {}
    for name, way, reading in results:
        by_name.setdefault(name, {})[way] = reading
    misses = 0
    for name, ways in by_name.items():
        f, w120, w80 = ways.get("file"), ways.get("120 cols"), ways.get("80 cols")
        if f is None or w120 is None or w80 is None:
            continue
        split = w120.split + w80.split
        cut = w80.cut + w120.cut + f.cut + w80.escaped + w120.escaped + f.escaped
        bad = f.over + split + cut + f.long_sentences + f.nested
        misses += bad > 0
        print(f"{name:<13} {f.lines:>5} {f.longest:>7} {f.over:>4} {split:>9} {cut:>6} {f.long_sentences:>9} "
              f"{f.nested:>3}  {'PASS' if not bad else 'MISS'}")  # fmt: skip
    print("split@120: numbers split across rows at 120 and at 80 columns.")
    print("cut@80: cells cut with an ellipsis, or a row break shown as \\n, at any width.")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())

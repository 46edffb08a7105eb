"""Noise runs: the per-CPU table, periodic sources, attribution and the
tracer's matches; in a report, the timelines, durations, heatmap and lost
time by source, all drawn from the run's NoiseTrace; one export row per CPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console

from quietcore.attribution import busy, explain
from quietcore.errors import UsageError
from quietcore.facts.cpulist import format_cpulist
from quietcore.report import account, tables, text
from quietcore.report.kinds.base import AVAILABLE, GAP_MAX, Kind, run_row
from quietcore.runs.model import Run
from quietcore.safe import markup

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section

WINDOW_MS = 50.0  # the short window of the noise timeline: a dozen ticks at 250 Hz


def lines(run: Run) -> list[str]:
    """What follows the table: notes, periodic sources, verdicts."""
    out = list(text.noise_notes(run.summary))
    out += [markup(line) for line in busy.lines(run.analysis)]  # a command's name is stored text
    if "error" in run.analysis:
        out.append(f"The analysis of this run failed ({run.analysis['error']}); the measurement is stored.")
    return out


class NoiseKind(Kind):
    name = "noise"
    in_report = True

    def terminal(self, out: Console, run: Run) -> None:
        self.view(out, run)

    def view(self, out: Console, run: Run, facts: Mapping[str, Any] | None = None, only: int | None = None,
             per_cpu: bool = False) -> None:  # fmt: skip
        """The run as text: every CPU's detail up to summary.DETAIL_UP_TO CPUs (or with
        `per_cpu`), one CPU's with `only`; above, summed up with its outliers named."""
        from quietcore.report import summary  # numpy: read once a noise run is shown, not when kinds are listed

        have = run.spin_cpus  # not run.trace: the events are not needed to say the run
        if have is None:
            out.print(text.quanta_table(run.result))
            return
        if only is not None:
            if only not in have:
                raise UsageError(f"invalid --cpu {only}: not in this run (valid: {format_cpulist(frozenset(have))})")
        elif not per_cpu and len(have) > summary.DETAIL_UP_TO:
            self._summary(out, run, facts or {})
            return
        rows = [r for r in run.summary if only is None or int(r["cpu"]) == only]
        out.print(text.noise_table(rows))
        for line in lines(run):
            out.print(line)
        accounts = account.of_run(run)
        for cpu in run.noise.cpus:
            if only is not None and cpu.cpu != only:
                continue
            mine = accounts.get(cpu.cpu)
            for line in text.periodic_lines(cpu, mine):
                out.print(line)
            if mine is not None:
                out.print(tables.account_table(mine))
                out.print(f"CPU {cpu.cpu}: {text.account_verdict(cpu, mine)}")
        traced = run.noise.tracer
        if traced and not traced.get("used"):
            out.print(f"No traced attribution: {traced['why']} (osnoise tracer: {traced['osnoise']}).")
        for line in explain.lines(run.analysis["explained"]) if "explained" in run.analysis else []:
            out.print(markup(line))

    def _summary(self, out: Console, run: Run, facts: Mapping[str, Any]) -> None:
        """Many CPUs in a screen (report.summary.screen)."""
        from quietcore.report import summary  # numpy, as in view

        said = summary.screen(run.summary, run.noise.cpus, account.of_run(run), facts, lines(run),
                              "--cpu {cpu} for its detail", where=run.context.get("topology"))  # fmt: skip
        for item in said:
            out.print(item)
        odd = sum(isinstance(item, str) and ": outlier: " in item for item in said)
        out.print(f"{len(run.noise.cpus)} CPUs, {odd} outlier(s); --per-cpu for every CPU's detail, --cpu N for one's.")

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report import figures, summary  # matplotlib: only when a report is drawn

        trace = run.trace
        if trace is None:
            from quietcore.report.render import grid

            s.grids.append(grid(text.quanta_table(run.result)))
            return
        accounts = account.of_run(run)
        many = len(trace.cpus) > summary.DETAIL_UP_TO  # as shown on a terminal: a node, each CPU's detail folded
        if many:
            self._node_section(b, s, run, accounts)
        else:
            self._cpus_section(s, run, accounts)
        if "explained" in run.analysis:  # after the screen, as a terminal gives them
            (s.screen if many else s.paragraphs).extend(explain.lines(run.analysis["explained"]))
        if many:  # the node at a glance first
            b.figure(s, figures.noise_heatmap(trace, where=run.context.get("topology")), "noise-heatmap",
                     "Lost time by CPU over the run, summed per slice: a row a CPU, so a CPU or a group of CPUs "
                     "apart from the rest stands out; the sockets as bands where the run kept them.")  # fmt: skip
        b.figure(s, figures.noise_timeline(trace), "noise-timeline",
                 f"The whole run, binned: each of {figures.SLICES} slices is coloured by the longest of the gaps that "
                 f"started in it ({trace.events} gaps recorded), so the bad stretches stand out.")  # fmt: skip
        b.figure(s, figures.noise_timeline(trace, WINDOW_MS), "noise-window",
                 f"The first {WINDOW_MS:g} ms, where single interruptions can be seen (each gap drawn at its true "
                 f"width, unless there are over {figures.MAX_MARKS}: then binned too).")  # fmt: skip
        b.figure(s, figures.noise_durations(trace), "noise-durations",
                 "How long the interruptions lasted: counts in log-spaced bins.")  # fmt: skip
        if not many:
            b.figure(s, figures.noise_heatmap(trace), "noise-heatmap", "Lost time by CPU over the run, summed per "
                     "slice.")  # fmt: skip
        b.figure(s, figures.attribution_bars(run.noise, accounts), "noise-attribution",
                 "Lost time by source; periodic sources found are named "
                 + ("in each CPU's detail." if many else "under each CPU."))  # fmt: skip

    def _cpus_section(self, s: Section, run: Run, accounts: Mapping[int, account.Account]) -> None:
        """A few CPUs: each one's table, sources and account in full."""
        from quietcore.report.render import grid

        s.grids.append(grid(text.noise_table(run.summary, "Per CPU")))
        s.paragraphs += lines(run)
        for cpu in run.noise.cpus:
            mine = accounts.get(cpu.cpu)
            s.paragraphs += text.periodic_lines(cpu, mine)
            if mine is not None:
                s.paragraphs.append(f"CPU {cpu.cpu}: {text.account_verdict(cpu, mine)}")
                s.grids.append(grid(tables.account_table(mine)))

    def _node_section(self, b: Builder, s: Section, run: Run, accounts: Mapping[int, account.Account]) -> None:
        """Many CPUs: the screen `results show` prints (groups, shared sources,
        outliers), then each CPU's detail folded, an outlier's open."""
        from quietcore.report import summary  # numpy, as in view
        from quietcore.report.builder import Fold
        from quietcore.report.render import grid

        facts = b.facts.get(run.session_id or -1, {})
        for item in summary.screen(run.summary, run.noise.cpus, accounts, facts, lines(run),
                                   "its detail is open below", where=run.context.get("topology")):  # fmt: skip
            s.screen.append(item if isinstance(item, str) else grid(item))  # in its order: tables among lines
        odd = summary.odd_cpus(run.summary, run.noise.cpus, facts, run.context.get("topology"))
        s.folds.append(Fold(f"Every CPU's row ({len(run.summary)} CPUs)",
                            grids=[grid(text.noise_table(run.summary, "Per CPU"))]))  # fmt: skip
        for cpu in run.noise.cpus:
            mine = accounts.get(cpu.cpu)
            fold = Fold(f"CPU {cpu.cpu}" + (": outlier" if cpu.cpu in odd else ""), open=cpu.cpu in odd)
            fold.paragraphs += [f"Outlier: {why}." for why in odd.get(cpu.cpu, ())]
            fold.paragraphs += text.periodic_lines(cpu, mine)
            if mine is not None:
                fold.paragraphs.append(text.account_verdict(cpu, mine))
                fold.grids.append(grid(tables.account_table(mine)))
            s.folds.append(fold)

    def rows(self, run: Run) -> list[dict[str, Any]]:
        shared = run_row(run)
        return [{**shared, **summary} for summary in run.summary] or [shared]

    def figures(self, run: Run) -> dict[int, dict[str, float]]:
        return {int(r["cpu"]): {GAP_MAX: float(r["max_gap_ns"]) / 1e3, AVAILABLE: float(r["available_pct"])}
                for r in run.summary}  # fmt: skip


KIND = NoiseKind()

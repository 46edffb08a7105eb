"""Noise runs: the per-CPU table, periodic sources, attribution and the
tracer's matches; in a report, the timelines, durations, heatmap and lost
time by source, all drawn from the run's NoiseTrace; one export row per CPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console

from quietcore.attribution import busy
from quietcore.errors import UsageError
from quietcore.facts.cpulist import format_cpulist
from quietcore.report import account, explained, sources, tables, text
from quietcore.report.kinds.base import AVAILABLE, GAP_MAX, Kind, run_row
from quietcore.runs.model import Run

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section

WINDOW_MS = 50.0  # the short window of the noise timeline: a dozen ticks at 250 Hz


def virtualized(facts: Mapping[str, Any] | None) -> bool:
    """Whether the session's node is a VM, as its facts say."""
    return bool(((facts or {}).get("virtualization") or {}).get("virtualized"))


def lines(run: Run) -> list[str]:
    """What follows the table: notes, periodic sources, verdicts."""
    out = list(text.noise_notes(run.summary))
    out += busy.lines(run.analysis)
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
        cpus = [cpu for cpu in run.noise.cpus if only is None or cpu.cpu == only]
        virtual = virtualized(facts)
        out.print(sources.table(cpus, accounts))
        for note in sources.notes(sources.shown(cpus)):
            out.print(note)
        noted = False
        for cpu in cpus:
            mine = accounts.get(cpu.cpu)
            if mine is not None:
                out.print(tables.account_table(mine))
                if mine.traced and not noted:
                    out.print(tables.ACCOUNT_NOTE)
                    noted = True
                out.print(text.account_words(cpu, mine, virtual))
        traced = run.noise.tracer
        if traced and not traced.get("used"):
            out.print(f"Not traced: {traced['why']}. The kernel's counters named the sources instead.")
        for item in explained.items(run.analysis["explained"]) if "explained" in run.analysis else []:
            out.print(item)

    def _summary(self, out: Console, run: Run, facts: Mapping[str, Any]) -> None:
        """Many CPUs in a screen (report.summary.screen)."""
        from quietcore.report import summary  # numpy, as in view

        said = summary.screen(run.summary, run.noise.cpus, account.of_run(run), facts, lines(run),
                              "--cpu {cpu}", where=run.context.get("topology"))  # fmt: skip
        for item in said.items:
            out.print(item)
        out.print(said.closing(len(run.noise.cpus)))

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
            self._cpus_section(b, s, run, accounts)
        if "explained" in run.analysis:  # after the screen, as a terminal gives them
            from quietcore.report.render import grid

            for item in explained.items(run.analysis["explained"]):
                s.screen.append(item if isinstance(item, str) else grid(item))
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

    def _cpus_section(self, b: Builder, s: Section, run: Run, accounts: Mapping[int, account.Account]) -> None:
        """A few CPUs: each one's table, sources and account in full."""
        from quietcore.report.render import grid

        s.grids.append(grid(text.noise_table(run.summary, "Per CPU")))
        s.paragraphs += lines(run)
        s.grids.append(grid(sources.table(run.noise.cpus, accounts)))
        s.paragraphs += sources.notes(sources.shown(run.noise.cpus))
        virtual = virtualized(b.facts.get(run.session_id or -1, {}))
        for cpu in run.noise.cpus:
            mine = accounts.get(cpu.cpu)
            if mine is not None:
                s.grids.append(grid(tables.account_table(mine)))
                s.paragraphs.append(text.account_words(cpu, mine, virtual))
        if any(a.traced for a in accounts.values()):
            s.paragraphs.append(tables.ACCOUNT_NOTE)

    def _node_section(self, b: Builder, s: Section, run: Run, accounts: Mapping[int, account.Account]) -> None:
        """Many CPUs: the screen `results show` prints (groups, shared sources,
        outliers), then each CPU's detail folded, an outlier's open."""
        from quietcore.report import summary  # numpy, as in view
        from quietcore.report.builder import Fold
        from quietcore.report.render import grid

        facts = b.facts.get(run.session_id or -1, {})
        said = summary.screen(run.summary, run.noise.cpus, accounts, facts, lines(run), "its CPU's section below",
                              where=run.context.get("topology"))  # fmt: skip
        for item in said.items:
            s.screen.append(item if isinstance(item, str) else grid(item))  # in its order: tables among lines
        odd = said.outliers
        s.folds.append(Fold(f"Every CPU's row ({len(run.summary)} CPUs)",
                            grids=[grid(text.noise_table(run.summary, "Per CPU"))]))  # fmt: skip
        virtual = virtualized(facts)
        for cpu in run.noise.cpus:
            mine = accounts.get(cpu.cpu)
            fold = Fold(f"CPU {cpu.cpu}" + (": outlier" if cpu.cpu in odd else ""), open=cpu.cpu in odd)
            fold.paragraphs += [f"Outlier: {why}." for why in odd.get(cpu.cpu, ())]
            fold.grids.append(grid(sources.table([cpu], {cpu.cpu: mine} if mine else {})))
            if mine is not None:
                fold.grids.append(grid(tables.account_table(mine)))
                fold.paragraphs.append(text.account_words(cpu, mine, virtual))
            s.folds.append(fold)

    def rows(self, run: Run) -> list[dict[str, Any]]:
        shared = run_row(run)
        return [{**shared, **summary} for summary in run.summary] or [shared]

    def figures(self, run: Run) -> dict[int, dict[str, float]]:
        return {int(r["cpu"]): {GAP_MAX: float(r["max_gap_ns"]) / 1e3, AVAILABLE: float(r["available_pct"])}
                for r in run.summary}  # fmt: skip


KIND = NoiseKind()

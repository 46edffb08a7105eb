"""A progress bar with an ETA on stderr, only when stderr is a terminal, so
piped and --json output stay clean."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn


@contextmanager
def progress_bar(total_s: float, enabled: bool = True) -> Iterator[Callable[[str, float], None]]:
    """Yield update(description, seconds_done_in_total)."""
    console = Console(stderr=True, emoji=False)  # a cell's name is the user's: ":ab:" is no emoji
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not (enabled and console.is_terminal),
        # Redrawn at each update, not by a thread of its own ten times a second: quietcore
        # measures the CPUs it runs on, and a redraw there is noise it would count.
        auto_refresh=False,
    )
    with progress:
        task = progress.add_task("starting", total=total_s)

        def update(description: str, done_s: float) -> None:
            progress.update(task, description=description, completed=min(done_s, total_s), refresh=True)

        yield update

"""The presentation layer (quietcore.wrap, report.screen) and the reader's check (tests/readable.py) that
the suite holds every output to: each is shown catching what issue 56 found, on text made to have it."""

from __future__ import annotations

import io
import re

from rich.table import Table

from quietcore.report.screen import Screen, fit
from quietcore.wrap import cell_len, file_width, wrap
from tests import readable
from tests.conftest import screen_table

NAMES = "the host: its timer, or its scheduling of this vCPU, which no guest tracer sees at all"


def test_prose_wraps_at_spaces_with_a_hanging_indent_and_keeps_a_command_whole() -> None:
    line = "  - CPU 1: 28 gaps over 100 µs, 3.3 ms in all; run `quietcore noise --cpus 1 --duration 60` to see more"
    rows = wrap(line, 50)
    assert all(cell_len(r) <= 50 for r in rows), rows
    assert " ".join(r.strip() for r in rows) == line.strip()  # nothing lost, no word cut
    assert all(r.startswith("    ") for r in rows[1:]), rows  # under the item's text, past its marker
    assert any("`quietcore noise --cpus 1 --duration 60`" in r for r in rows), rows
    # a command longer than a row is broken at its spaces, not left to the terminal
    assert all(cell_len(r) <= 20 for r in wrap("see `quietcore noise --cpus 1 --duration 60` now", 20))


def test_a_file_is_100_columns_unless_columns_says_otherwise() -> None:
    assert file_width({}) == 100
    assert file_width({"COLUMNS": "132"}) == 132
    assert file_width({"COLUMNS": "7"}) == 40  # the narrowest honoured
    assert file_width({"COLUMNS": "wide"}) == 100


def _table() -> Table:
    table = Table(title="Noise of CPUs 0-383")
    for name in ("CPUs", "Hz", "source", "basis", "µs each", "share of lost"):
        table.add_column(name, justify="right" if name in ("Hz", "µs each", "share of lost") else "left")
    table.add_row("0-382 every 2nd (192)", "1,000.00", "the host", NAMES, "7.1-11.6", "60%")
    table.add_row("1-383 every 2nd (192)", "250.00", "the tick", "counted: LOC 238-241/s", "7.4-16.2", "20%")
    return table


def _printed(width: int, *items: object, terminal: bool = False) -> str:
    out = io.StringIO()
    Screen(file=out, width=width, force_terminal=terminal, color_system=None).print(*items)
    return out.getvalue()


def test_a_cells_row_break_is_a_row_in_a_terminal_as_in_a_file() -> None:
    """A terminal's table showed a cell's second line as a literal \\n ("[1]\\n+67.1 timer"); a file's did not."""
    table = Table()
    table.add_column("at s")
    table.add_column("what ran in it")
    table.add_row("0.72", "+827.7 vector local_timer [1]\n+845.9 timer tick_nohz_handler [2]")
    for terminal in (False, True):
        said = _printed(80, table, terminal=terminal)
        assert "\\n" not in said and said.count("tick_nohz_handler") == 1, said
        rows = [line.rstrip() for line in said.splitlines()]
        assert rows[-2:] == ["0.72  +827.7 vector local_timer [1]", "      +845.9 timer tick_nohz_handler [2]"], rows


def test_a_table_at_80_and_at_60_columns_cuts_no_number_and_no_cpu_list() -> None:
    for width in (120, 80, 60):
        said = _printed(width, _table())
        assert "…" not in said and max(cell_len(line) for line in said.splitlines()) <= width, said
        for figure in ("1,000.00", "7.1-11.6", "0-382 every 2nd (192)", "60%", "238-241/s"):
            assert figure in said, (width, said)
    # at 60 the columns that do not fit move to a second table, the first column, whole, in front of them again
    narrow = _printed(60, _table())
    heads = [line for line in narrow.splitlines() if line.startswith("CPUs ")]
    assert len(heads) == 2 and narrow.count("0-382 every 2nd (192)") == 2, narrow


def test_a_table_reads_back_as_its_cells_whatever_the_width() -> None:
    for width in (120, 80):
        rows = screen_table(_printed(width, _table()), "Noise of CPUs 0-383")
        assert [r[:3] for r in rows] == [["0-382 every 2nd (192)", "1,000.00", "the host"],
                                         ["1-383 every 2nd (192)", "250.00", "the tick"]], rows  # fmt: skip
        assert rows[0][3] == NAMES, rows  # a prose cell's wrapped lines, joined


def test_a_name_with_a_terminals_escapes_is_text_in_a_cell_a_title_and_prose() -> None:
    hostile = "\x1b]2;PWN\x07\x1b[2J"
    table = Table(title=f"Intruders of {hostile}")
    table.add_column("what")
    table.add_column("name")
    table.add_row("task", hostile)
    said = _printed(80, table, f"task {hostile} ran", "line\nforged")
    assert "\x1b" not in said and "\x07" not in said, repr(said)
    assert said.count("\\x1b]2;PWN\\x07\\x1b[2J") == 3, said
    # a printed string's newline is its own line; the screen does not join what a renderer broke
    assert "line\nforged" in said


def test_an_empty_column_is_left_out() -> None:
    table = Table()
    for name in ("ID", "tags", "host"):
        table.add_column(name)
    table.add_row("1", "", "vm")
    (only,) = fit(table, 80)
    assert [str(c.header) for c in only.columns] == ["ID", "host"]


def test_the_readers_check_finds_each_fault_it_is_for() -> None:
    long_sentence = " ".join(["word"] * 41) + "."
    assert any(p.startswith("41 words") for p in readable.problems(long_sentence, 100))
    assert any(p.startswith("nested") for p in readable.problems("A source (the host (its timer)) ran.", 100))
    assert any(p.startswith("over 120") for p in readable.problems("x " * 70, 100))
    # a long line that is a command or a path is not too long; an error's one line is not either
    assert readable.problems("run " + "`quietcore noise --cpus " + ",".join(map(str, range(60))) + "`", 100) == []
    assert readable.problems("quietcore: error: invalid --cpus " + ",".join(map(str, range(0, 120, 2))), 100) == []
    # a list of valid values is not a sentence's words
    assert readable.problems("invalid --x (valid: " + ", ".join(map(str, range(20, 45))) + ")", 100) == []
    # a sentence wrapped to the width is read whole: 30 words over two rows are 30, not two sentences
    wrapped = "\n".join(wrap("A " + " ".join(["word"] * 28) + " end.", 60))
    assert len(wrapped.splitlines()) > 1 and readable.problems(wrapped, 60) == []
    assert readable.problems("\n".join(wrap(long_sentence, 60)), 60) != []
    # what a terminal of 20 columns did to a line of 31: split "1,234" after its 20th column
    said = readable.read("twelve chars wide 1,234 µs lost", 20)
    assert said.split == 1 and re.search(r"1,' / '234", said.examples[0]), said.examples
    # a table's row that only fills the width was not wrapped
    assert readable.read("x" * 19 + "1\n2" + "y" * 19, 20).split == 0

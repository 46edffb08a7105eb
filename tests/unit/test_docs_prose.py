"""The user's pages read as STYLE.md's "Writing for the reader" asks (issue 59): no sentence over 45 words,
no parenthesis inside a parenthesis, at most 22 words a sentence on average, measured as tests/docprose.py
reads a page (prose only); and their code blocks fit, as the terminal prints them at 100 columns.
`python -m tests.docprose README.md docs/*.md docs/commands/*.md` prints each page's reading as a table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docprose import AVERAGE, read_page, table

ROOT = Path(__file__).resolve().parents[2]
#: For developers, not users: the rule does not hold them
DEVELOPER = {"docs/development.md", "docs/layers.md"}
PAGES = sorted(
    str(p.relative_to(ROOT))
    for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs" / "commands").glob("*.md")]
    if str(p.relative_to(ROOT)) not in DEVELOPER
)
#: The longest line of a code block: example output as the terminal prints it at 100 columns fits, a command may
#: run on to 120.
CODE_LINE = 120


def _wide_code_lines(text: str) -> list[str]:
    inside, wide = False, []
    for line in text.splitlines():
        if line.strip().startswith(("```", "~~~")):
            inside = not inside
        elif inside and len(line) > CODE_LINE:
            wide.append(line)
    return wide


@pytest.mark.parametrize("page", PAGES)
def test_a_users_page_code_fits_in_120_columns(page: str) -> None:
    wide = _wide_code_lines((ROOT / page).read_text(encoding="utf-8"))
    assert not wide, f"{page}: {len(wide)} code lines over {CODE_LINE}:\n" + "\n".join(wide)


@pytest.mark.parametrize("page", PAGES)
def test_a_users_page_reads_in_short_sentences(page: str) -> None:
    r = read_page((ROOT / page).read_text(encoding="utf-8"))
    assert not r.long and not r.nested, "\n".join(r.long + r.nested)
    assert r.average <= AVERAGE, f"{page}: {r.average:.1f} words a sentence"


def test_the_reading_table_measures_what_the_rule_does(tmp_path: Path) -> None:
    """The table the closing note quotes counts as the rule: a page of one 46-word sentence and one of history."""
    page = tmp_path / "p.md"
    long = " ".join(["word"] * 46)
    page.write_text(f"# Title\n\n{long}. The tenth round tried this on 2026-11-20.\n\n```\n{long}\n```\n")
    row = table([str(page)]).splitlines()[-1]
    assert row.endswith("| 53 | 26.5 | 46 | 50.0 % | 50 % |"), row

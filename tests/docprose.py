"""How a page of the docs reads (issue 59, STYLE.md's "Writing for the
reader"): its prose only, code blocks, tables, headings and HTML left out;
a list item is a sentence's start; a link counts as its text. Sentences are
split and words counted as tests/readable.py does for a command's output."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.readable import nested

#: A sentence of more words than this is too long for a user's page.
WORDS = 45
#: The most words a sentence a page may average.
AVERAGE = 22
_FENCE = re.compile(r"^(```|~~~)")
_SKIP = ("|", "#", "<", "![", "    ")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
#: A period that ends no sentence: "e.g. a", "0.5 ms" (no space), "vs. b"
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|vs|etc|cf|approx)\.)$")
_WORD = re.compile(r"[A-Za-z0-9µ]")


def paragraphs(markdown: str) -> Iterator[str]:
    """The prose of a page, a paragraph or list item at a time."""
    inside, current = False, list[str]()
    for line in markdown.splitlines():
        if _FENCE.match(line.strip()):
            inside = not inside
            yield from _flush(current)
            current = []
            continue
        if inside or not line.strip() or line.startswith(_SKIP) or line.lstrip().startswith(("|", "#", "<")):
            yield from _flush(current)
            current = []
            continue
        if _ITEM.match(line):
            yield from _flush(current)
            current = [_ITEM.sub("", line)]
        else:
            current.append(line.strip())
    yield from _flush(current)


def _flush(lines: list[str]) -> Iterator[str]:
    if lines:
        yield _LINK.sub(r"\1", " ".join(lines))


def sentences(markdown: str) -> Iterator[str]:
    """A paragraph's sentences: split after . ! or ? and a space, whatever the next word's case (a sentence
    may start with a command's name: "tuned keeps ..."), but after an abbreviation."""
    for paragraph in paragraphs(markdown):
        pieces: list[str] = []
        for piece in _END.split(paragraph):
            if pieces and _ABBREVIATION.search(pieces[-1]):
                pieces[-1] += " " + piece
            else:
                pieces.append(piece)
        yield from (p.strip() for p in pieces if p.strip())


def words(sentence: str) -> int:
    return sum(1 for w in sentence.split() if _WORD.search(w))


@dataclass
class PageReading:
    words: int = 0
    sentences: int = 0
    longest: int = 0
    long: list[str] = field(default_factory=list)  # sentences over WORDS
    nested: list[str] = field(default_factory=list)

    @property
    def average(self) -> float:
        return self.words / self.sentences if self.sentences else 0.0


def read_page(markdown: str) -> PageReading:
    r = PageReading()
    for s in sentences(markdown):
        n = words(s)
        r.words += n
        r.sentences += 1
        r.longest = max(r.longest, n)
        if n > WORDS:
            r.long.append(f"{n} words: {s}")
        if nested(s):
            r.nested.append(s)
    return r


#: A sentence that tells how a figure came to be, not what is (issue 59's "figures from development history"):
#: rounds, replays and templates tried, what an older version did, an issue or a commit. A date alone is not:
#: today's figures are dated.
_HISTORY = re.compile(
    r"\b(?:(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th)) (?:round|stop|try)|"
    r"templates?|tried|dropped|landed|used to|no longer|at first|an older|earlier (?:quietcore|version|code)|"
    r"this stop|last stop|was measured|were measured|once took|issue \d+|stop \d+|replays? of this VM)\b|"
    r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b",
    re.IGNORECASE,
)
#: A sentence this long or longer counts in the table's "over 40" column (the issue's measure).
TABLE_LONG = 40


def history(sentence: str) -> bool:
    return bool(_HISTORY.search(sentence))


def table(pages: list[str]) -> str:
    """The issue's table for these pages: words, words a sentence, the longest, the share of sentences over 40
    words, and the share that tells development history. `python -m tests.docprose README.md docs/*.md`"""
    from pathlib import Path

    rows = ["| page | words | words / sentence | longest | sentences > 40 words | history |"]
    rows.append("|---|---|---|---|---|---|")
    for page in pages:
        said = list(sentences(Path(page).read_text(encoding="utf-8")))
        counts = [words(s) for s in said]
        n = len(said) or 1
        over = 100 * sum(c > TABLE_LONG for c in counts) / n
        told = 100 * sum(map(history, said)) / n
        rows.append(f"| {page} | {sum(counts):,} | {sum(counts) / n:.1f} | {max(counts, default=0)} | {over:.1f} % | "
                    f"{told:.0f} % |")  # fmt: skip
    return "\n".join(rows)


if __name__ == "__main__":
    import sys

    print(table(sys.argv[1:]))

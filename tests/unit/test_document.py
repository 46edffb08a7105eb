"""The report's documents (HTML and Markdown) keep a section's screen in order."""

from __future__ import annotations

from quietcore.report.builder import Report, Section
from quietcore.report.document import html, markdown
from quietcore.report.render import Grid


def test_a_screens_lines_and_tables_keep_their_order_and_are_escaped() -> None:
    """A node of many CPUs: the HTML drew every table, then every line, so its account's table
    stood above the source lines that lead to it. Stored text stays text."""
    table = Grid("CPUs 0-383 (all): where <b>1 ms</b> went", ["source", "lost ms"], [["LOC <i>", "1.00"]])
    section = Section("Run 1: noise", level=3, screen=["CPUs 0-383: periodic <script>", table, "CPU 96: outlier"])
    page = html(Report("quietcore report", [section]))
    lead, caption, after = (page.index(s) for s in ("periodic &lt;script&gt;", "<caption>CPUs 0-383 (all): where "
                                                     "&lt;b&gt;1 ms&lt;/b&gt; went", "<p>CPU 96: outlier"))  # fmt: skip
    assert lead < caption < after and "<td>LOC &lt;i&gt;</td>" in page and "<script>" not in page
    text = markdown(Report("quietcore report", [section]))
    assert text.index("periodic \\<script\\>") < text.index("| LOC \\<i\\> | 1.00 |") < text.index("CPU 96: outlier")

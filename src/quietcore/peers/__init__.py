"""Peers' results read into quietcore: oslat's and cyclictest's --json files
and rtla osnoise's top and hist text, each as a run of its own kind, so that
`results show`, `compare` and `report` put a site's old rt-tests and rtla
results beside quietcore's. Every file is hostile input: a parser refuses
what it does not recognise, in one line, and stores nothing. The parsers
are in `read` (numpy: the histograms' quantiles), apart from the names the
command line offers."""

from __future__ import annotations

FORMATS = ("oslat", "cyclictest", "rtla-osnoise")

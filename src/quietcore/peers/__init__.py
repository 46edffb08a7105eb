"""Peers' results read into quietcore: oslat's and cyclictest's --json files
and rtla osnoise's top and hist text, each as a run of its own kind, so that
`results show`, `compare` and `report` put a site's old rt-tests and rtla
results beside quietcore's. Every file is hostile input: a parser refuses
what it does not recognise, in one line, and stores nothing."""

from __future__ import annotations

from quietcore.peers import rtests, rtla
from quietcore.peers.common import Imported

FORMATS = ("oslat", "cyclictest", "rtla-osnoise")


def parse(tool: str, text: str, name: str) -> Imported:
    """The run a peer's file holds, and the facts it gives about its node."""
    if tool == "rtla-osnoise":
        return rtla.parse(text, name)
    return rtests.parse(tool, text, name)

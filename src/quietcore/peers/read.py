"""One entry to the peers' parsers."""

from __future__ import annotations

from quietcore.peers import rtests, rtla
from quietcore.peers.common import Imported


def parse(tool: str, text: str, name: str) -> Imported:
    """The run a peer's file holds, and the facts it gives about its node."""
    if tool == "rtla-osnoise":
        return rtla.parse(text, name)
    return rtests.parse(tool, text, name)

"""The filesystem root facts are read from: `/` on a node, a snapshot or a
fixture directory in tests. Every reader goes through here, so every parser
can be tested against real machines' files."""

from __future__ import annotations

import os
from pathlib import Path


class Root:
    def __init__(self, path: str | os.PathLike[str] = "/") -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Root({str(self.path)!r})"

    @property
    def is_live(self) -> bool:
        """True when this root is the running node itself."""
        return self.path.resolve() == Path("/")

    def resolve(self, rel: str) -> Path:
        return self.path / rel.lstrip("/")

    def read_text(self, rel: str) -> str | None:
        """The file's text, or None when it is missing or unreadable."""
        try:
            return self.resolve(rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def read_line(self, rel: str) -> str | None:
        text = self.read_text(rel)
        return None if text is None else text.strip()

    def read_bytes(self, rel: str) -> bytes | None:
        try:
            return self.resolve(rel).read_bytes()
        except OSError:
            return None

    def exists(self, rel: str) -> bool:
        return self.resolve(rel).exists()

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.resolve(rel)))
        except OSError:
            return []

"""The filesystem root facts are read from: `/` on a node, a snapshot or a
fixture directory in tests. Every reader goes through here, so every parser
can be tested against real machines' files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class Root:
    def __init__(self, path: str | os.PathLike[str] = "/") -> None:
        self.path = Path(path)
        self._manifest: dict[str, Any] | None = None

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
        return self.read(rel)[0]

    def read(self, rel: str) -> tuple[str | None, str | None]:
        """(text, None), or (None, why not): "missing", "permission denied
        (needs root)", or the system's words for other failures. In a
        snapshot, a file that could not be read when it was taken says so."""
        try:
            return self.resolve(rel).read_text(encoding="utf-8", errors="replace"), None
        except FileNotFoundError:
            why = self._unreadable().get("/" + rel.lstrip("/"))
            return None, f"unreadable when the snapshot was taken: {why}" if why else "missing"
        except PermissionError:
            return None, "permission denied (needs root)"
        except OSError as exc:
            return None, exc.strerror or str(exc)

    def manifest(self) -> dict[str, Any]:
        """The snapshot manifest when this root is a snapshot, else {}."""
        if self._manifest is None:
            try:
                data = json.loads((self.path / "quietcore-snapshot.json").read_text())
                self._manifest = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                self._manifest = {}
        return self._manifest

    def _unreadable(self) -> dict[str, str]:
        unreadable = self.manifest().get("unreadable", {})
        return unreadable if isinstance(unreadable, dict) else {}

    def read_line(self, rel: str) -> str | None:
        text = self.read_text(rel)
        return None if text is None else text.strip()

    def read_bytes(self, rel: str) -> bytes | None:
        try:
            return self.resolve(rel).read_bytes()
        except OSError:
            return None

    def write(self, rel: str, value: str) -> None:
        """Write one value to a file of this root (a sysfs or procfs knob,
        or its stand-in in a fixture tree); OSError as the kernel gives it."""
        with open(self.resolve(rel), "w", encoding="utf-8") as handle:
            handle.write(value)

    def exists(self, rel: str) -> bool:
        return self.resolve(rel).exists()

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.resolve(rel)))
        except OSError:
            return []

"""The filesystem root facts are read from: `/` on a node, a snapshot or a
fixture directory in tests. Every reader goes through here, so every parser
can be tested against real machines' files."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from quietcore.inputs import MAX_DEPTH, json_depth

#: The most quietcore reads of one file: a kernel config is ~300 KB, the
#: largest /proc file it reads (interrupts of a 512-CPU node) a few MB. A
#: snapshot or a fixture tree is another machine's input, and may hold a
#: file of any size.
MAX_FILE = 32 << 20


class Root:
    def __init__(self, path: str | os.PathLike[str] = "/") -> None:
        self.path = Path(path)
        self._manifest: dict[str, Any] | None = None
        self._real = os.path.realpath(self.path)

    def __repr__(self) -> str:
        return f"Root({str(self.path)!r})"

    @property
    def is_live(self) -> bool:
        """True when this root is the running node itself."""
        return self._real == "/"

    def _open(self, rel: str) -> int:
        """A descriptor on a regular file of this root. In a root that is
        not the node (a snapshot, a fixture tree), a link may not lead out
        of it; a FIFO or a device is refused everywhere (a read would block
        or never end)."""
        path = self.resolve(rel)
        if not self.is_live:
            real = os.path.realpath(path)
            if real != self._real and not real.startswith(self._real.rstrip("/") + "/"):
                raise OSError(errno.EXDEV, "a link that leads out of the root")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file")
        return fd

    def _read(self, rel: str) -> bytes:
        fd = self._open(rel)
        try:
            chunks, size = [], 0
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_FILE:
                    raise OSError(errno.EFBIG, f"larger than {MAX_FILE:,} bytes: not read")
            return b"".join(chunks)
        finally:
            os.close(fd)

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
            return self._read(rel).decode("utf-8", errors="replace"), None
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
                text = self._read("quietcore-snapshot.json").decode("utf-8")
                data = json.loads(text) if json_depth(text) <= MAX_DEPTH else None
                self._manifest = data if isinstance(data, dict) else {}
            except (OSError, ValueError):  # (a manifest nested too deep is none: json.loads would recurse)
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
            return self._read(rel)
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

"""Memory the kernel says is available (/proc/meminfo, MemAvailable: its
estimate of what can be allocated without swapping, Documentation/
filesystems/proc.rst)."""

from __future__ import annotations

from quietcore.facts.root import Root


def parse_meminfo(text: str) -> dict[str, int]:
    """Field -> bytes (the file gives kB)."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            out[name.strip()] = int(words[0]) * (1024 if words[1:2] == ["kB"] else 1)
    return out


def available_bytes(root: Root) -> int | None:
    return parse_meminfo(root.read_text("proc/meminfo") or "").get("MemAvailable")

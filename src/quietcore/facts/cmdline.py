"""The kernel command line, split as the kernel splits it (lib/cmdline.c,
next_arg): spaces separate parameters except inside double quotes, and the
quotes are removed; everything after a bare `--` goes to init."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cmdline:
    raw: str
    params: tuple[tuple[str, str | None], ...] = field(default=())

    def get(self, name: str) -> str | None:
        """The last value given for `name` (the kernel lets later ones win)."""
        value: str | None = None
        for key, val in self.params:
            if key == name:
                value = val if val is not None else ""
        return value

    def has(self, name: str) -> bool:
        return any(key == name for key, _ in self.params)


def _split(raw: str) -> list[str]:
    args: list[str] = []
    current: list[str] = []
    quoted = False
    started = False
    for ch in raw:
        if ch == '"':
            quoted = not quoted
            started = True
        elif ch.isspace() and not quoted:
            if started:
                args.append("".join(current))
                current, started = [], False
        else:
            current.append(ch)
            started = True
    if started:
        args.append("".join(current))
    return args


def parse_cmdline(raw: str) -> Cmdline:
    params: list[tuple[str, str | None]] = []
    for arg in _split(raw.strip()):
        if arg == "--":
            break  # the rest is init's
        key, sep, value = arg.partition("=")
        params.append((key, value if sep else None))
    return Cmdline(raw=raw.strip(), params=tuple(params))

"""An action on the node as data: what kind of knob, which one, the value
to set, what doing it needs, and the audit finding it fixes. Findings carry
actions as their advice and levers plan them; the advice text is rendered
from the data, so a program never has to parse prose to act on a finding."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from quietcore import knobs
from quietcore.knobs.base import ThreadTarget

#: Advice quietcore gives but does not carry out, and how a person would (see `Action.text`).
ADVICE_KINDS = (
    "sysctl",  # sysctl -w TARGET=VALUE
    "cgroup",  # a systemd unit's cgroup: systemctl set-property --runtime TARGET VALUE
    "service",  # a systemd service: systemctl VALUE TARGET
    "boot-parameter",  # the kernel command line: TARGET=VALUE (TARGET alone when VALUE is empty)
    "kernel-config",  # a kernel build option: a kernel built with TARGET=VALUE
    "command",  # a command to run as it stands (TARGET), for tools quietcore does not drive (cpupower)
    "note",  # no change quietcore can make: TARGET says what to do
)
#: Every kind: the knob kinds quietcore writes (one module each in knobs/, which says its
#: targets and how it is carried out), then the advice. A new knob kind is listed in knobs alone.
KINDS = (*knobs.KINDS, *ADVICE_KINDS)
NEEDS = ("root", "reboot", "hardware")


@dataclass(frozen=True)
class Action:
    kind: str
    target: str
    value: str = ""
    needs: tuple[str, ...] = ("root",)
    fixes: str | None = None
    note: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown action kind {self.kind!r} (valid: {', '.join(KINDS)})")
        bad = [n for n in self.needs if n not in NEEDS]
        if bad:
            raise ValueError(f"unknown need {bad[0]!r} (valid: {', '.join(NEEDS)})")

    def text(self) -> str:
        """The command or step a person would type, and the note after it."""
        return _render(self) + (f" ({self.note})" if self.note else "")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "value": self.value, "needs": list(self.needs),
                "fixes": self.fixes, "note": self.note or None, "text": self.text()}  # fmt: skip


def _render(a: Action) -> str:
    if a.kind in knobs.KINDS:  # a knob quietcore writes: its kind says how a person would
        return knobs.KINDS[a.kind].render(a.target, a.value)
    if a.kind == "sysctl":
        return f"sysctl -w {a.target}={a.value}"
    if a.kind == "cgroup":
        return f"systemctl set-property --runtime {a.target} {a.value}"
    if a.kind == "service":
        return f"systemctl {a.value} {a.target}"
    if a.kind == "boot-parameter":
        return boot_line(boot_word(a))
    if a.kind == "kernel-config":
        return f"use a kernel built with {a.target}={a.value}"
    return a.target


def boot_line(words: str) -> str:
    return (f"add {words} to the kernel command line and reboot; with GRUB, in GRUB_CMDLINE_LINUX of "
            "/etc/default/grub, then update-grub")  # fmt: skip


def sentence(note: str) -> str:
    """A note as a sentence of its own: capitalised, with its end."""
    note = note.strip().rstrip(".")
    first = note.split(" ", 1)[0]
    return note[:1].upper() + note[1:] if first.isalpha() and first.islower() else note


def boot_word(a: Action) -> str:
    return f"{a.target}={a.value}" if a.value else a.target


_IRQ_FILE = re.compile(r"/proc/irq/(\d+)/smp_affinity")


def advice_lines(actions: Iterable[Action]) -> list[str]:
    """The advice text of a list of actions. Boot parameters of one finding
    go on one line (they are one edit of the command line), and the same
    CPU list for many tasks is one loop rather than a line per pid."""
    lines: list[str] = []
    actions = list(actions)
    i = 0
    while i < len(actions):
        a = actions[i]
        j = i + 1
        while j < len(actions) and _joins(actions[j], a):
            j += 1
        group = actions[i:j]
        if a.kind == "boot-parameter" and len(group) > 1:
            notes = list(dict.fromkeys(g.note for g in group if g.note))  # one note said once
            words = " ".join(boot_word(g) for g in group)
            lines.append(boot_line(words) + "".join(f". {sentence(n)}" for n in notes))
        elif a.kind == "task-affinity" and len(group) > 1:
            pids = " ".join(str(ThreadTarget.parse(g.target, g.kind).tid) for g in group)
            lines.append(f"for pid in {pids}; do taskset -pc {a.value} $pid; done")
        elif a.kind == "irq-affinity" and len(group) > 1:
            # A device's 8 or 64 vectors to one place: one loop, where a line each filled a screen
            irqs = " ".join(_IRQ_FILE.fullmatch(g.target)[1] for g in group)  # type: ignore[index]
            lines.append(f"for irq in {irqs}; do echo {a.value} > /proc/irq/$irq/smp_affinity; done")
        else:
            lines += [g.text() for g in group]
        i = j
    return lines


def _joins(b: Action, a: Action) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind == "irq-affinity":
        return a.value == b.value and bool(_IRQ_FILE.fullmatch(a.target)) and bool(_IRQ_FILE.fullmatch(b.target))
    return a.kind == "boot-parameter" or (a.kind == "task-affinity" and a.value == b.value)


def from_json(data: dict[str, Any]) -> Action:
    return Action(data["kind"], data["target"], data.get("value") or "", tuple(data.get("needs") or ()),
                  data.get("fixes"), data.get("note") or "")  # fmt: skip

"""The knob kinds, one module each, by the name an Action and a journal
entry carry. Writing any knob goes through its kind, which refuses a target
outside its patterns, whoever asks. Adding a kind is one module here and
its tests."""

from __future__ import annotations

from quietcore.knobs import controller, cpuset_dir, cpuset_task, irq, pmqos, procfs, service, sysfs, thread
from quietcore.knobs.base import Gone, Kind, TargetError, ThreadKind
from quietcore.knobs.files import FileKind

KINDS: dict[str, Kind] = {
    m.KIND.name: m.KIND for m in (sysfs, procfs, irq, thread, cpuset_dir, cpuset_task, controller, service, pmqos)
}
#: Made from the registry by class, so that a new kind's module is all it takes.
THREAD_KINDS = tuple(name for name, k in KINDS.items() if isinstance(k, ThreadKind))
FILE_KINDS = tuple(name for name, k in KINDS.items() if isinstance(k, FileKind))

__all__ = ["FILE_KINDS", "KINDS", "THREAD_KINDS", "Gone", "Kind", "TargetError", "kind"]


def kind(name: str) -> Kind:
    """The kind `name`; TargetError for any other (a plan file's, say)."""
    found = KINDS.get(name)
    if found is None:
        raise TargetError(f"refused knob kind {name!r} (valid: {', '.join(KINDS)})")
    return found

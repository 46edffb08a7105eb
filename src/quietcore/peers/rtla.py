"""rtla osnoise's text: `top` (a row per CPU: periods, runtime, noise, the
available share, the longest noise, the longest single one, and counts of HW,
NMI, IRQ, softirq and thread interference) and `hist` (a column per CPU of
counts per bucket, then over, count, min, avg and max). Times are in µs, or
in ns where the header says so (-N)."""

from __future__ import annotations

import json
import re
from typing import Any

from quietcore.peers.common import Imported, bad
from quietcore.runs.model import Run

TOP_ROW = re.compile(r"^\s*(\d+)\s+#(\d+)" + r"\s+(\d+)" * 2 + r"\s+([\d.]+)" + r"\s+(\d+)" * 7 + r"\s*$")
TOP_FIELDS = ("runtime", "noise", "available_pct", "max_noise", "max_single", "hw", "nmi", "irq", "softirq",
              "thread")  # fmt: skip


def parse(text: str, name: str) -> Imported:
    if "RTLA osnoise histogram" in text:
        mode, cpus = "hist", _hist(text, name)
    elif "Operating System Noise" in text:
        mode, cpus = "top", _top(text, name)
    else:
        raise bad(name, "not rtla osnoise top or hist output (no 'Operating System Noise' or "
                  "'RTLA osnoise histogram' header)")  # fmt: skip
    duration = re.search(r"[Dd]uration:\s+(\d+) (\d\d):(\d\d):(\d\d)", text)
    seconds = (int(duration.group(1)) * 86400 + int(duration.group(2)) * 3600 + int(duration.group(3)) * 60
               + int(duration.group(4))) if duration else None  # fmt: skip
    result = {"tool": "rtla-osnoise", "mode": mode, "duration_s": seconds, "cpus": cpus}
    envelope = {"format": f"rtla-osnoise-{mode}", "command": "rtla-osnoise", "start": "", "end": "", "result": result}
    run = Run(kind="rtla-osnoise", params={"imported": name, "tool": "rtla-osnoise", "mode": mode}, started="",
              ended="", envelope=envelope, text=json.dumps(envelope))  # fmt: skip
    return Imported(run, {"imported": {"tool": "rtla-osnoise", "file": name, "mode": mode}})


def _scale(text: str) -> float:
    """To µs: rtla -N prints ns."""
    head = "\n".join(text.splitlines()[:6]).lower()
    return 1e-3 if ("time is in ns" in head or "nanoseconds" in head) else 1.0


def _top(text: str, name: str) -> list[dict[str, Any]]:
    scale = _scale(text)
    cpus = []
    for line in text.splitlines():
        m = TOP_ROW.match(line)
        if not m:
            continue
        values = dict(zip(TOP_FIELDS, (float(v) for v in m.groups()[2:]), strict=True))
        for timed in ("runtime", "noise", "max_noise", "max_single"):
            values[f"{timed}_us"] = values.pop(timed) * scale
        if not 0 <= values["available_pct"] <= 100:
            raise bad(name, f"CPU {m.group(1)}'s available share {values['available_pct']} is not 0-100 %")
        cpus.append({"cpu": int(m.group(1)), "periods": int(m.group(2)), **values})
    if not cpus:
        raise bad(name, "an rtla osnoise top header but no CPU row (CPU #PERIODS RUNTIME NOISE %AVAIL ...)")
    return cpus


def _hist(text: str, name: str) -> list[dict[str, Any]]:
    scale = _scale(text)
    lines = [line.split() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    header = next((row for row in lines if row and row[0] == "Index"), None)
    if header is None or len(header) < 2 or not all(re.fullmatch(r"CPU-\d+", h) for h in header[1:]):
        raise bad(name, "an rtla osnoise histogram without its 'Index CPU-000 ...' header")
    ids = [int(h[4:]) for h in header[1:]]
    counts: list[list[tuple[float, int]]] = [[] for _ in ids]
    stats: dict[str, list[float]] = {}
    for row in lines:
        if row[0] == "Index":
            continue
        if len(row) != len(ids) + 1:
            raise bad(name, f"a histogram row of {len(row) - 1} columns under {len(ids)} CPUs: {' '.join(row)[:60]}")
        try:
            values = [float(v) for v in row[1:]]
        except ValueError as exc:
            raise bad(name, f"a histogram row that is not numbers: {' '.join(row)[:60]}") from exc
        if row[0].endswith(":"):
            stats[row[0][:-1]] = values
        elif row[0].isdigit():
            for i, v in enumerate(values):
                counts[i].append((float(row[0]) * scale, int(v)))
        else:
            raise bad(name, f"an unknown histogram row {row[0]!r}")
    out = []
    for i, cpu in enumerate(ids):
        c: dict[str, Any] = {"cpu": cpu, "histogram_us": [[u, n] for u, n in counts[i]]}
        for key in ("over", "count"):
            if key in stats:
                c[key] = int(stats[key][i])
        for key in ("min", "avg", "max"):
            if key in stats:
                c[f"{key}_us"] = stats[key][i] * scale
        out.append(c)
    return out

"""oslat's and cyclictest's --json files (rt-tests 2.x: `file_version` 1, a
`thread` object per measuring thread with its CPU, min, avg and max in µs and,
with a histogram, its counts per µs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quietcore import inputs
from quietcore.peers.common import Imported, bad, number, when
from quietcore.runs.model import Run
from quietcore.stats.percentiles import histogram_quantile

#: Where a histogram's bucket `b` lies, in µs: oslat counts a loop of b-1 to b µs in b (it rounds
#: up), cyclictest a latency of b to b+1 µs (it truncates).
BUCKET = {"oslat": (-1.0, 0.0), "cyclictest": (0.0, 1.0)}


def parse(tool: str, text: str, name: str) -> Imported:
    data = inputs.parse_json(text, f"invalid --from {tool}", Path(name), inputs.PEER)
    if not isinstance(data, dict) or not isinstance(data.get("thread"), dict):
        raise bad(name, f"not an {tool} --json file (no 'thread' object)")
    cmdline = str(data.get("cmdline:") or data.get("cmdline") or "")
    made_by = next((t for t in ("oslat", "cyclictest") if t in cmdline.split(" ", 1)[0]), None)
    if made_by is not None and made_by != tool:
        raise bad(name, f"written by {made_by}, not {tool} (its cmdline: {cmdline[:80]!r}): use --from {made_by}")
    cpus = [_thread(tool, key, t, name) for key, t in sorted(data["thread"].items(), key=lambda kv: str(kv[0]))]
    if not cpus:
        raise bad(name, "no thread measured")
    raw_info = data.get("sysinfo")
    sysinfo: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
    started = when(data.get("start_time")) or ""
    ended = when(data.get("end_time")) or ""
    result = {"tool": tool, "tool_version": str(data.get("rt_test_version:") or data.get("rt_test_version") or ""),
              "cmdline": cmdline, "return_code": data.get("return_code"), "cpus": cpus}  # fmt: skip
    if "resolution_in_ns" in data:
        result["resolution_ns"] = data["resolution_in_ns"]
    envelope = {"format": f"{tool}-json", "command": tool, "start": started, "end": ended, "result": result}
    run = Run(kind=tool, params={"imported": name, "tool": tool}, started=started, ended=ended,
              envelope=envelope, text=json.dumps(envelope))  # fmt: skip
    facts = {"kernel": {"release": str(sysinfo.get("release", "")), "version": str(sysinfo.get("version", ""))},
             "imported": {"tool": tool, "file": name, "host": str(sysinfo.get("nodename", "")),
                          "cmdline": cmdline}}  # fmt: skip
    return Imported(run, facts)


def _thread(tool: str, key: str, t: Any, name: str) -> dict[str, Any]:
    if not isinstance(t, dict) or "cpu" not in t:
        raise bad(name, f"thread {key!r} has no cpu")
    cpu = int(number(t["cpu"], name, f"thread {key}'s cpu"))
    out: dict[str, Any] = {"thread": str(key), "cpu": cpu}
    for field in ("min", "avg", "max"):
        out[f"{field}_us"] = number(t.get(field), name, f"thread {key}'s {field}")
    if tool == "oslat":
        out["duration_s"] = number(t.get("duration"), name, f"thread {key}'s duration")
        out["freq_mhz"] = t.get("freq")
    else:
        out["cycles"] = int(number(t.get("cycles"), name, f"thread {key}'s cycles"))
    histogram = t.get("histogram")
    if histogram is not None:
        if not isinstance(histogram, dict):
            raise bad(name, f"thread {key}'s histogram is not an object")
        try:
            pairs = sorted((float(k), int(v)) for k, v in histogram.items())
        except (TypeError, ValueError) as exc:
            raise bad(name, f"thread {key}'s histogram has a bad bucket ({exc})") from exc
        if any(c < 0 for _, c in pairs):
            raise bad(name, f"thread {key}'s histogram has a negative count")
        out["histogram_us"] = [[u, c] for u, c in pairs]
        lo, hi = BUCKET[tool]
        rows = [[b + lo, b + hi, c] for b, c in pairs]
        for q in (0.5, 0.99):
            out[f"p{q * 100:g}_us"] = histogram_quantile(rows, q) if sum(c for _, c in pairs) else None
    return out

#!/usr/bin/env python3
"""Run a foreign wheel's probe under qemu-user and check what it prints: calibrate, a short noise run
and a verified matrix multiply. A test that the aarch64 build is correct, not of its timings: under
qemu the counter is emulated and every figure of time means nothing.

    tools/probe_under_qemu.py WHEEL

Needs qemu-user-static and the target's C library (Debian: apt-get install qemu-user-static
gcc-aarch64-linux-gnu, whose libc6-arm64-cross qemu takes with -L)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any


def _run(qemu: list[str], probe: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run([*qemu, str(probe), *args], capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise SystemExit(f"probe {args[0]} under qemu: exit {done.returncode}: {done.stderr.strip()}")
    envelope: dict[str, Any] = json.loads(done.stdout)
    return envelope


def main() -> int:
    if len(sys.argv) != 2:
        print(
            "usage: tools/probe_under_qemu.py WHEEL (a manylinux_2_17 wheel of another architecture)", file=sys.stderr
        )
        return 2
    wheel = Path(sys.argv[1])
    arch = re.search(r"manylinux_2_17_(\w+?)\.whl$", wheel.name)
    if arch is None:
        print(f"probe_under_qemu: {wheel.name} is not a manylinux_2_17 wheel", file=sys.stderr)
        return 2
    machine = arch.group(1)
    qemu = [f"qemu-{machine}-static", "-L", f"/usr/{machine}-linux-gnu"]
    failed: list[str] = []

    def check(what: str, ok: bool, seen: object) -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {machine} probe under qemu: {what} ({seen})")
        if not ok:
            failed.append(what)

    with tempfile.TemporaryDirectory() as work:
        with zipfile.ZipFile(wheel) as z:
            z.extract("quietcore/bin/quietcore-probe", work)
        probe = Path(work) / "quietcore/bin/quietcore-probe"
        os.chmod(probe, 0o755)  # a zip member keeps no mode here; pip sets it from the wheel's RECORD

        cal = _run(qemu, probe, "calibrate")
        check("it ran as this architecture", cal["uname"]["machine"] == machine, cal["uname"]["machine"])
        result = cal["result"]
        if machine == "aarch64":
            declared = result["kernel"]["cntfrq"]["hz"]
            check("the counter is cntvct", result["counter"] == "cntvct", result["counter"])
            near = declared is not None and abs(result["hz"] / declared - 1) < 0.01
            check("its frequency is what CNTFRQ_EL0 declares, within 1%", near, f"{result['hz']:.0f} Hz")

        noise = _run(qemu, probe, "noise", "--cpus", "0", "--duration", "0.3")["result"]
        threshold = noise["threshold"]
        tick = 1e9 / noise["counter"]["hz"]
        check("the threshold is said as its rule says, at least 500 ns",
              threshold["ns"] >= 500 and threshold["auto"], f"{threshold['ns']} ns, a tick {tick:.1f} ns")  # fmt: skip
        check("the tick it reports is the counter's", math.isclose(threshold["tick_ns"], tick, rel_tol=1e-3),
              f"{threshold['tick_ns']:.2f} ns")  # fmt: skip
        cpu = noise["cpus"][0]
        check("one CPU was measured for its duration", cpu["cpu"] == 0 and cpu["measured_ns"] > 0.2e9,
              f"{cpu['measured_ns'] / 1e9:.2f} s")  # fmt: skip

        mm = _run(qemu, probe, "matmul", "--cpus", "0", "--n", "64")["result"]
        check("a 64 x 64 multiply checks its own product", mm["verified"] is True, f"checksum {mm['checksum']}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The audit as a normal user: files only root may read give their reason.
The check runs in a forked child that drops to nobody, because this
machine's Python lives where nobody cannot start it again."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from quietcore.audit import run_checks
from quietcore.audit.context import AuditContext
from quietcore.facts.root import Root
from tests.conftest import XEON_ROOT

NOBODY = 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to nobody")
def test_root_only_files_say_why() -> None:
    base = Path(tempfile.mkdtemp(prefix="qc-unpriv-"))
    try:
        base.chmod(0o755)
        root = base / "root"
        shutil.copytree(XEON_ROOT, root)
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (root / "sys/kernel/debug/sched/preempt").chmod(0o600)  # debugfs is root-only
        (root / "boot/config-6.8.0-45-generic").unlink()  # so debugfs alone could decide
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: drop privileges, audit, report, exit
            try:
                os.close(read_end)
                os.setgroups([])
                os.setresgid(NOBODY, NOBODY, NOBODY)
                os.setresuid(NOBODY, NOBODY, NOBODY)
                _, why = Root(root).read("sys/kernel/debug/sched/preempt")
                findings = {f.id: f.to_json() for f in run_checks(AuditContext(Root(root)))}
                os.write(write_end, json.dumps({"why": why, "preempt": findings["sched.preempt"]}).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            data = json.loads(pipe.read())
        os.waitpid(pid, 0)
    finally:
        shutil.rmtree(base)
    assert data["why"] == "permission denied (needs root)"
    preempt = data["preempt"]
    # uname -v says PREEMPT_DYNAMIC, but which mode runs only debugfs can say.
    assert preempt["status"] == "unknown"
    assert {"source": "/sys/kernel/debug/sched/preempt", "value": "permission denied (needs root)"} in preempt[
        "evidence"
    ]
    assert any("audit again as root" in a for a in preempt["advice"]) and preempt["needs"] == ["root"]
    assert preempt["actions"][0]["kind"] == "command" and "mount -t debugfs" in preempt["actions"][0]["target"]

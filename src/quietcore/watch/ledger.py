"""What a running `watch` keeps in the node's state directory (root's, checked as statedir checks it), so
that a restart counts nothing twice and a Slurm Epilog can ask for a job's account:

- watch.pid: the watcher's pid and its start time, so that a second watcher is refused and an Epilog knows
  one runs;
- watch-live.json: every live job's figures so far, written after each look: a restarted watcher goes on
  from them, and what a look added is counted once;
- watch-end-JOBID: an Epilog's request that the job be closed now; watch-ended-JOBID: the watcher's answer,
  the session its record is stored as and its one line.

Every file is opened without following links and must be root's (statedir); every figure read back is
checked as any stored text is."""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from quietcore import inputs
from quietcore.errors import NotADatabase
from quietcore.owner import alive, start_time
from quietcore.statedir import StateDir, node_path
from quietcore.watch.charge import Charge

PID, LIVE = "watch.pid", "watch-live.json"
REQUEST, ANSWER = "watch-end-", "watch-ended-"
#: A Slurm job id as its cgroup and $SLURM_JOB_ID give it
JOB_ID = re.compile(r"\d{1,12}")
#: The most a state file holds: a node's live jobs, each with its top sources
MAX_BYTES = 64 << 20


@dataclass
class Tracked:
    """A live job: its figures so far, when it was first seen, and its cgroup."""

    charge: Charge
    started: str
    cgroup: str


@dataclass(frozen=True)
class Answer:
    session: int | None  # None: the job was never seen
    line: str


class Ledger:
    def __init__(self, state: StateDir) -> None:
        self.state = state

    @staticmethod
    def open(create: bool = True) -> Ledger:
        return Ledger(StateDir.open(node_path(), create=create, owner=0))

    def close(self) -> None:
        self.state.close()

    def _read(self, name: str) -> str | None:
        try:
            fd = self.state.open_file(name, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            return None
        return data.decode("utf-8", "replace")

    def _write(self, name: str, text: str) -> None:
        """The whole file or nothing: a new file beside it, then renamed over it, within the directory."""
        tmp = f".{name}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=self.state.fd)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=self.state.fd)  # fmt: skip
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.rename(tmp, name, src_dir_fd=self.state.fd, dst_dir_fd=self.state.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.state.fd)
            raise

    def _remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.state.fd)

    # the watcher's side

    def watcher(self) -> int | None:
        """The pid of the watcher that runs, if one does."""
        text = self._read(PID)
        if text is None:
            return None
        pid, _, started = text.strip().partition(" ")
        if not pid.isdigit() or len(pid) > 10:
            return None
        return int(pid) if alive(int(pid), started or None) and started else None

    def claim(self) -> None:
        self._write(PID, f"{os.getpid()} {start_time(os.getpid())}\n")

    def release(self) -> None:
        if self.watcher() == os.getpid():
            self._remove(PID)

    def live(self) -> dict[str, Tracked]:
        """The live jobs' figures a watcher before this one left; none if the file is not what it wrote."""
        text = self._read(LIVE)
        if not text:
            return {}
        try:
            got = inputs.stored(text, "watch's state")
            return {str(k): Tracked(Charge.from_json(v["charge"]), str(v["started"]), str(v["cgroup"]))
                    for k, v in got.items()}  # fmt: skip
        except (NotADatabase, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def save(self, totals: dict[str, Tracked]) -> None:
        self._write(LIVE, json.dumps({k: {"charge": t.charge.to_json(200), "started": t.started, "cgroup": t.cgroup}
                                      for k, t in totals.items()}))  # fmt: skip

    def requests(self) -> list[str]:
        """The job ids an Epilog asked to close."""
        try:
            names = os.listdir(self.state.fd)
        except OSError:
            return []
        return sorted(n[len(REQUEST) :] for n in names if n.startswith(REQUEST) and JOB_ID.fullmatch(n[len(REQUEST) :]))

    def answer(self, job: str, session: int | None, line: str) -> None:
        self._write(f"{ANSWER}{job}", json.dumps({"session": session, "line": line}))
        self._remove(f"{REQUEST}{job}")

    # the Epilog's side

    def ask(self, job: str) -> None:
        self._remove(f"{ANSWER}{job}")
        self._write(f"{REQUEST}{job}", "")

    def answered(self, job: str) -> Answer | None:
        text = self._read(f"{ANSWER}{job}")
        if text is None:
            return None
        self._remove(f"{ANSWER}{job}")
        try:
            got: Any = inputs.stored(text, "watch's answer")
            session = got["session"]
            return Answer(session if type(session) is int else None, str(got["line"]))
        except (NotADatabase, KeyError, TypeError):
            return None

    def withdraw(self, job: str) -> None:
        self._remove(f"{REQUEST}{job}")

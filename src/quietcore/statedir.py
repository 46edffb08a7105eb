"""quietcore's node state: the journal of knob changes, the node locks and
the PM QoS holder's identity, in one directory that no other user can write.

As root it is /run/quietcore: per boot, like tuned's /run/tuned, because
every knob quietcore writes is run-time state that a reboot resets, and
root-only, because what it says is acted on as root (a change replayed, a
process signalled). A user's own quietcore keeps its state in
$XDG_RUNTIME_DIR/quietcore (else /tmp/quietcore-UID), which only that user
may write. $QUIETCORE_STATE_DIR names another directory (the tests' own);
it passes the same checks, so it cannot hand the state to someone else
(a user's quietcore locks the files of that directory, root's, read-only).

Before every use the directory is checked as sudo and OpenSSH check a file
they are about to trust: every component from / down is a directory and not
a link, owned by root or by us, and writable by no one else (a sticky
directory such as /tmp is allowed above a component we own). Its files are
opened relative to the directory's descriptor with O_NOFOLLOW, and each must
be a regular file with one link, owned as expected."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from quietcore.errors import CommandError
from quietcore.outputs import unsafe_component

ENV_VAR = "QUIETCORE_STATE_DIR"
ROOT_DIR = Path("/run/quietcore")


class StateError(CommandError):
    """The state directory or one of its files is not safe to use: exit 3."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=3)


def node_path() -> Path:
    """The node's state directory, root's: $QUIETCORE_STATE_DIR, else /run/quietcore."""
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else ROOT_DIR


def default_path() -> Path:
    """This process's own state: the node's as root; a user's own otherwise
    (a user only locks the node's files, read-only)."""
    if os.geteuid() == 0:
        return node_path()
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and _owned_dir(Path(runtime), os.geteuid()):
        return Path(runtime) / "quietcore"
    return Path(f"/tmp/quietcore-{os.geteuid()}")


def _owned_dir(path: Path, uid: int) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o022


def why_unsafe(path: Path, owner: int) -> str | None:
    """None when `path` is a directory only `owner` (and root) can change,
    reached through directories no one else can change; else why not."""
    if not path.is_absolute() or ".." in path.parts:
        return f"{path} is not an absolute path without '..'"
    parts = path.parts
    for depth in range(1, len(parts) + 1):
        here = Path(*parts[:depth])
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return f"{here} does not exist"
        except OSError as exc:
            return f"cannot inspect {here}: {exc.strerror}"
        last = depth == len(parts)
        if stat.S_ISLNK(st.st_mode):
            return f"{here} is a symbolic link"
        if not stat.S_ISDIR(st.st_mode):
            return f"{here} is not a directory"
        why = unsafe_component(st, str(here), last, owner)
        if why:
            return why
    return None


class StateDir:
    """The checked directory, open as a descriptor for the life of a `with`
    block (or until close)."""

    def __init__(self, path: Path, owner: int, fd: int) -> None:
        self.path, self.owner, self.fd = path, owner, fd

    @staticmethod
    def open(path: Path | None = None, *, create: bool = True, owner: int | None = None) -> StateDir:
        """Check (making it first, when `create`) and open the state
        directory. Raises StateError naming what is wrong; FileNotFoundError
        when it is missing and not to be made."""
        path = path or default_path()
        owner = os.geteuid() if owner is None else owner
        if create and not os.path.lexists(path):
            with contextlib.suppress(FileExistsError, FileNotFoundError):  # checked below like any other
                # root's is readable by all, so users can lock its lock files read-only; a user's is theirs alone
                os.mkdir(path, 0o755 if owner == 0 else 0o700)
        if not os.path.lexists(path):
            raise FileNotFoundError(str(path))
        why = why_unsafe(path, owner)
        if why:
            raise StateError(f"refusing the state directory {path}: {why}; quietcore keeps what it acts on as "
                             f"{'root' if owner == 0 else 'this user'} where no one else can write "
                             "(remove it, or set $QUIETCORE_STATE_DIR)")  # fmt: skip
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(fd)
        if st.st_uid != owner or st.st_mode & 0o022:  # replaced between the look and the open
            os.close(fd)
            raise StateError(f"refusing the state directory {path}: it changed while it was opened")
        return StateDir(path, owner, fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> StateDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_file(self, name: str, flags: int, mode: int = 0o600, owner: int | None = None) -> int:
        """A descriptor on the file `name` of this directory, opened without
        following a link; it must be a regular file with one link, owned
        by `owner` (default: the directory's owner)."""
        if "/" in name or name in (".", ".."):
            raise ValueError(f"not a file name: {name!r}")
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=self.fd)
        try:
            check_file(os.fstat(fd), self.path / name, self.owner if owner is None else owner)
        except BaseException:
            os.close(fd)
            raise
        os.set_blocking(fd, True)
        return fd

    def file_path(self, name: str, owner: int | None = None) -> Path | None:
        """The path of an existing file of this directory once it is checked
        (for SQLite, which opens by name), or None when there is none."""
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        check_file(st, self.path / name, self.owner if owner is None else owner)
        return self.path / name

    def exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True


def check_file(st: os.stat_result, path: Path, owner: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise StateError(f"refusing {path}: not a regular file")
    if st.st_nlink != 1:
        raise StateError(f"refusing {path}: it has {st.st_nlink} links (a hard link to another file?)")
    if st.st_uid != owner:
        raise StateError(f"refusing {path}: owned by uid {st.st_uid}, not {owner}")
    if st.st_mode & 0o022:
        raise StateError(f"refusing {path}: writable by others (mode {st.st_mode & 0o7777:o})")

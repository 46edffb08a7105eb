"""Where quietcore may write what it makes: reports, exports, snapshots,
traces, metrics files. One rule for every such path, here.

As root, quietcore writes only through directories no other user can
change. The path is walked from / one component at a time, each opened
relative to the last with O_NOFOLLOW|O_DIRECTORY (openat), and each must be
a directory owned by root and writable by no one else. A sticky directory
that anyone may write (/tmp) is passed through, but what quietcore writes in
it must be root's: made new (mkdir, O_EXCL) or already root's. A link is
followed only when root owns it (its directory was checked before it), so
/var/run -> /run works and a link another user planted (a `reports` link
to /root/private beside their database) is refused. Missing directories are
made, mode 0755, by the same walk. Once every component is root's and closed
to others, no other user can swap one, and the path can be used as is.

A user's quietcore can do no more than that user can, and writes where it
is told (links followed, as any program's)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from quietcore.errors import UsageError

#: As many links as the kernel follows in one path (MAXSYMLINKS).
MAX_LINKS = 40


class Refused(UsageError):
    """A path quietcore will not write through: exit 2, naming the option."""


def directory(path: Path | str, option: str, *, make: bool = True, hint: str = "", leaf: bool = False) -> Path:
    """`path` as a directory quietcore may write in (made, with its parents,
    when missing and `make`): as root, checked as the module says and given
    back with its links resolved. `leaf`: the caller makes one new entry in
    it, or checks the one there is root's, so it may be sticky (/tmp).
    Raises Refused naming `option`, with `hint` (what to do instead) after
    the reason; FileNotFoundError when it is missing and not to be made."""
    path = Path(path)
    if os.geteuid() != 0:
        if not make and not path.is_dir():
            raise FileNotFoundError(str(path))
        if make:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                raise Refused(f"invalid {option} {path}: not a directory") from None
            except OSError as exc:
                raise Refused(f"cannot create {option} {path}: {exc.strerror}") from exc
        return path
    why, where = _walk(path, make, leaf)
    if why is not None:
        raise Refused(f"refusing {option} {path}: {why}{'; ' + hint if hint else ''}")
    return where


def file(path: Path | str, option: str, *, hint: str = "") -> Path:
    """`path` as a file quietcore may write (write_atomic: a new file, then a
    rename over the name): its directory, which must exist, as `directory`
    checks it, and, as root, the file itself, where it exists, a regular
    file of root's."""
    path = Path(path)
    if not path.name or path.name in (".", ".."):
        raise Refused(f"invalid {option} {path}: not a file name")
    try:
        where = directory(path.parent, option, make=False, hint=hint, leaf=True) / path.name
    except FileNotFoundError:
        raise Refused(f"invalid {option} {path}: directory {path.parent} does not exist") from None
    if os.geteuid() == 0:
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(where)
            if not stat.S_ISREG(st.st_mode):
                raise Refused(f"refusing {option} {path}: {where} is not a regular file")
            if st.st_uid != 0:
                raise Refused(f"refusing {option} {path}: {where} is owned by uid {st.st_uid}, not root")
    return where


def _walk(path: Path, make: bool, leaf: bool) -> tuple[str | None, Path]:
    """(why not, or None; the path walked, links resolved)."""
    parts = [p for p in str(path if path.is_absolute() else Path.cwd() / path).split("/") if p not in ("", ".")]
    stack: list[tuple[int, str]] = []  # (descriptor, physical path) from / down
    links = 0
    try:
        stack.append((os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), "/"))
        why = unsafe_component(os.fstat(stack[0][0]), "/", not parts and not leaf, owner=0)
        if why:
            return why, path
        while parts:
            name = parts.pop(0)
            fd, here = stack[-1]
            if name == "..":  # the physical parent: the walk came down through it
                if len(stack) > 1:
                    os.close(stack.pop()[0])
                continue
            shown = os.path.join(here, name)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: checked below as any other
                    os.mkdir(name, 0o755, dir_fd=fd)
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                if st.st_uid != 0:
                    return f"{shown} is a link owned by uid {st.st_uid}, not root", path
                links += 1
                if links > MAX_LINKS:
                    return f"{shown}: too many levels of links", path
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop()[0])
                parts[:0] = [p for p in target.split("/") if p not in ("", ".")]
                continue
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ENOTDIR:
                    return f"{shown} is not a directory", path
                if exc.errno == errno.ELOOP:
                    return f"{shown} became a link while it was checked", path
                raise
            stack.append((child, shown))
            why = unsafe_component(os.fstat(child), shown, not parts and not leaf, owner=0)
            if why:
                return why, path
        return None, Path(stack[-1][1])
    except FileNotFoundError:
        raise
    except OSError as exc:
        return f"cannot inspect it: {exc.strerror}", path
    finally:
        for fd, _ in stack:
            os.close(fd)


def unsafe_component(st: os.stat_result, shown: str, last: bool, owner: int) -> str | None:
    """Why a directory on a trusted path is not safe, or None: the rule sudo and OpenSSH
    apply, and the state directory's (statedir.why_unsafe) too. It is root's or
    `owner`'s (the last one `owner`'s), and no one else may write it, but for a sticky
    directory above the last (/tmp: what is made in it is checked after)."""
    if st.st_uid not in (0, owner) or (last and st.st_uid != owner):
        return f"{shown} is owned by uid {st.st_uid}, not {'root' if owner == 0 else f'uid {owner}'}"
    if st.st_mode & 0o022 and not (st.st_mode & stat.S_ISVTX and not last):
        who = "group" if st.st_mode & 0o020 else "others"
        return f"{shown} is writable by {who} (mode {st.st_mode & 0o7777:o})"
    return None

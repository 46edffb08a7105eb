"""Copy every file quietcore reads into a directory or a .tar.gz, for --root.

Attach it to a bug report, or audit many nodes offline:
  quietcore snapshot --out node17.tar.gz
  quietcore audit --root node17.tar.gz
Files that could not be read (without root, say) are listed in the
snapshot's quietcore-snapshot.json with the reason.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from quietcore.commands import common
from quietcore.errors import UsageError
from quietcore.facts.root import Root
from quietcore.facts.snapshot import write

NAME = "snapshot"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="PATH", help="a new directory, or a file ending in .tar.gz")
    parser.add_argument("--force", action="store_true", help="replace PATH if it exists")
    common.add_db(parser)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    root = Root("/")
    try:
        manifest = write(root, out, args.force, common.journal_of(root)[0])
    except OSError as exc:
        raise UsageError(f"cannot write --out {out}: {exc.strerror or exc}") from exc
    unreadable = manifest["unreadable"]
    print(f"Wrote {manifest['files']} files to {out}.")
    if unreadable:
        print(f"{len(unreadable)} files could not be read (listed in quietcore-snapshot.json); run as root for all.")
    print(f"Audit it with: quietcore audit --root {out}")
    return 0

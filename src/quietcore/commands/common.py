"""Options several commands share, added and read the same way."""

from __future__ import annotations

import argparse
from pathlib import Path

from quietcore.facts.root import Root
from quietcore.options import tags_option
from quietcore.store import db


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH",
        help=f"results database (default: ${db.ENV_VAR}, else $XDG_DATA_HOME/quietcore/results.db)",
    )


def add_tags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="label the session (repeatable)")


def db_path(args: argparse.Namespace) -> tuple[Path, bool]:
    return db.resolve_path(args.db)


def tags(args: argparse.Namespace) -> dict[str, str]:
    return tags_option(args.tag)


def live_root() -> Root:
    """Measuring commands read the node they run on."""
    return Root("/")

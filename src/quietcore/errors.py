"""One exception hierarchy, caught only in cli.main (after memray)."""

from __future__ import annotations


class QuietcoreError(Exception):
    """An expected failure, shown to the user as one line."""

    exit_code = 1


class UsageError(QuietcoreError):
    """Bad input: an option value, an unknown ID. Exit code 2."""

    exit_code = 2


class CommandError(QuietcoreError):
    """A failure with a chosen exit code (1 failure, 3 not supported here)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Interrupted(QuietcoreError):
    """Ctrl-C or SIGTERM: what was measured is stored; exit code 130."""

    exit_code = 130


class StoreError(QuietcoreError):
    """The results database cannot be opened, read or written."""


class NotADatabase(StoreError):
    """The file given as the database is none (a FIFO, a device, random bytes): bad input, exit 2."""

    exit_code = 2

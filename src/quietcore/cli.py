"""The `quietcore` command: parse arguments in one place, dispatch to one
module per subcommand, and turn every expected error into one line and an
exit code (0 ok, 1 failure, 2 bad usage, 3 not supported here, 130 Ctrl-C)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from collections.abc import Iterable
from types import FrameType
from typing import NoReturn

from quietcore._version import __version__
from quietcore.commands import COMMANDS
from quietcore.commands import load as load_command
from quietcore.errors import QuietcoreError, UsageError
from quietcore.heap import keep_freed_memory
from quietcore.wrap import terminal_width, wrap

REQUIRED = "the following arguments are required: "


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints usage and exits; we want one line and our exit path.
        # A subcommand's parser names its command ("run custom: ..."), after the
        # "quietcore: error:" prefix main prints, which its prog would repeat.
        if message.startswith(REQUIRED):
            message += self._values_of(message[len(REQUIRED) :].split(", "))
        command = self.prog.removeprefix("quietcore").strip()
        raise UsageError(f"{command}: {message}" if command else message)

    def _values_of(self, missing: list[str]) -> str:
        """What a missing argument takes, when it is one of a few values (`quietcore
        tune` alone): argparse names the argument, not its values. A name is as
        argparse writes it: the option strings, else the metavar, else the dest."""
        named: dict[str, str] = {}
        for action in self._actions:
            name = "/".join(action.option_strings) or str(action.metavar or action.dest)
            if action.choices is not None and name in missing:
                named[name] = ", ".join(str(c) for c in action.choices)
        if len(named) == 1:
            return f" (valid: {next(iter(named.values()))})"
        return "".join(f" ({name}: {values})" for name, values in named.items())


def build_parser(load: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser. Only the commands in `load` (every one when None) get their
    options: the others are named with their summary, so that `quietcore --help` and
    a command's run import no module they do not need."""

    parser = _Parser(
        prog="quietcore",
        description="Audit, measure and tune OS noise on Linux compute nodes.",
        epilog="Start with `quietcore lab`. `quietcore COMMAND --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"quietcore {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    wanted = set(COMMANDS) if load is None else set(load)
    for name, summary in COMMANDS.items():
        if name not in wanted:
            sub.add_parser(name, help=summary)
            continue
        module = load_command(name)
        command = sub.add_parser(
            name,
            help=summary,
            description=(module.__doc__ or "").strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command)
        _verbose(command, False)
        command.set_defaults(run=module.run)
    return parser


def _verbose(command: argparse.ArgumentParser, default: object) -> None:
    """--verbose on a command and on each of its actions (`results list --verbose`, as a user types it); an
    action's default is SUPPRESS, so `results --verbose list` keeps the command's True."""
    command.add_argument("--verbose", action="store_true", default=default,
                         help="also say the journal's housekeeping: what an ended quietcore left changed and this "
                              "command put back")  # fmt: skip
    for action in command._actions:  # argparse has no public way to list a parser's subparsers
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _verbose(child, argparse.SUPPRESS)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # SIGTERM and SIGHUP take the Ctrl-C path: the probe is stopped, what it measured
    # is stored, the session is closed as interrupted.
    raise KeyboardInterrupt


def healthcheck() -> int:
    """`quietcore-healthcheck`: `quietcore check --slurm-drain --wait 30` and any
    options given, for slurm.conf's HealthCheckProgram, which takes a path alone."""
    argv = ["check", "--slurm-drain", "--wait", "30", *sys.argv[1:]]
    sys.argv[1:] = argv  # the session stores the command as it ran
    return main(argv)


def _error(line: str) -> None:
    """An error in one line: in a file or pipe as it is, for a log's reader and grep; in a terminal wrapped to
    its width."""
    print("\n".join(wrap(line, terminal_width())) if sys.stderr.isatty() else line, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv) == ["--version"]:
        # Answered before the parser, which imports every command module.
        print(f"quietcore {__version__}")
        return 0
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGHUP, _on_sigterm)  # a closed terminal or ssh session: the same orderly end
    if os.geteuid() == 0:
        # Root's temporary files (a report's staging, simulate's input) never go where $TMPDIR
        # says: another user owning that directory could swap a file between its write and its read.

        tempfile.tempdir = "/tmp"
    args_in = sys.argv[1:] if argv is None else argv
    # The command is the first argument (the top level takes no option with a value).
    parser = build_parser(load=args_in[:1])
    try:
        args = parser.parse_args(args_in)
        if not getattr(args, "run", None):
            parser.print_help(sys.stderr)
            return 2
        # Before anything else, and for every command: undo what a crashed
        # quietcore left changed on this node. Imported here, as the command's own
        # module is: --help and --version need neither (quietcore.lazy).
        from quietcore.commands.common import recover_node

        keep_freed_memory()  # an analysis's arrays reused, not faulted in afresh (see quietcore.heap)
        recover_node(args)
        code: int = args.run(args)
        return code
    except QuietcoreError as exc:
        _error(f"quietcore: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        print("quietcore: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): not an error worth a traceback, and
        # stdout must not be flushed again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1

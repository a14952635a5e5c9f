"""The ``asyncq`` command line: ``asyncq worker``, and the operations commands.

Building the parser imports only what the options and help texts need (``--help`` and
``--version`` answer without redis-py, the worker or structlog): each command imports its
implementation's modules when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from .. import __version__
from .._text import printable
from . import (
    _cron_cmd,
    _dash_cmd,
    _group_cmd,
    _limit_cmd,
    _metrics_cmd,
    _queue_cmd,
    _scheduler_cmd,
    _server_cmd,
    _stats_cmd,
    _task_cmd,
    _web_cmd,
    _worker_cmd,
    _workflow_cmd,
)
from ._common import CLIError, warn_deprecated

COMMANDS = [_worker_cmd, _server_cmd, _scheduler_cmd, _cron_cmd,
            _stats_cmd, _queue_cmd, _task_cmd, _group_cmd, _limit_cmd, _dash_cmd,
            _metrics_cmd, _web_cmd, _workflow_cmd]


class Parser(argparse.ArgumentParser):
    """The parser of every command and subcommand: a long option is taken only when spelt in
    full (``--conc`` is no ``--concurrency``), and an argument a (sub)command does not know is
    answered with that command's own usage, not the top-level one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


#: Commands spelt as two words whose first is a command that runs a process: ``asyncq worker
#: ls`` lists what ``asyncq worker TARGET`` runs (a TARGET is ``module:attr``, never one of
#: these words), so the word for the concept is the same when running it and looking at it.
TWO_WORD_COMMANDS = frozenset({"worker ls", "scheduler ls", "scheduler history"})


def _joined(argv: Sequence[str]) -> list[str]:
    """``argv`` with a two-word command (``worker ls``) made the one argument it is parsed as."""
    if len(argv) >= 2 and f"{argv[0]} {argv[1]}" in TWO_WORD_COMMANDS:
        return [f"{argv[0]} {argv[1]}", *argv[2:]]
    return list(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="asyncq", description="asyncq task queue")
    parser.add_argument("--version", action="version", version=f"asyncq {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                parser_class=Parser)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``asyncq`` command; returns the exit code."""
    args = build_parser().parse_args(_joined(sys.argv[1:] if argv is None else argv))
    from .._errors import AsyncqError
    from .._log_setup import configure_logging, logging_restored

    # What the library logs goes to stderr (warnings and up), so an ops command's stdout —
    # its table or its --json document — is only its output; worker and scheduler set their
    # own logging from their flags. The previous set-up is restored afterwards, so calling
    # main() in-process (tests, embedding) leaves the caller's logging as it was.
    with logging_restored():  # (structlog's set-up and the root logger's handlers)
        configure_logging("warning")
        warn_deprecated(args)
        try:
            code: int = args.func(args)
        except (CLIError, AsyncqError, ValueError) as exc:
            _fatal(args, exc)
            return 1
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            return _pipe_closed()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return _pipe_closed()
    return code


def _fatal(args: argparse.Namespace, exc: Exception) -> None:
    """Say why the command stops, on stderr: one ``asyncq: error:`` line, or, under
    ``--log-format json``, one JSON line like the command's other log lines (a log pipeline
    parsing JSON gets the reason a pod exited, not a line it cannot read)."""
    if getattr(args, "log_format", None) != "json":
        print(printable(f"asyncq: error: {exc}"), file=sys.stderr)
        return
    from datetime import UTC, datetime

    import orjson

    at = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    line = {"component": "cli", "event": str(exc), "level": "error", "timestamp": at}
    sys.stderr.write(orjson.dumps(line).decode() + "\n")


def _pipe_closed() -> int:
    """The reader of our output went away (``asyncq task ls | head``): stop quietly, with the
    shell's status for SIGPIPE, and keep Python from complaining when it flushes at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141

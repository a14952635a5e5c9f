"""What every CLI command shares: connection flags, logging set-up, imports, errors."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from .._defaults import DEFAULT_REDIS_URL

REDIS_URL_ENV = "ASYNCQ_REDIS_URL"


class CLIError(Exception):
    """An error reported as one line on stderr with exit code 1."""


class _Replaced(argparse.Action):
    """An option spelling that is no longer taken: giving it stops the command with its usage
    and a line saying what to write instead (one name per option, as in the Python API)."""

    def __init__(self, option_strings: list[str], dest: str, *, use: str,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs="?",
                         default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        self.use = use

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        raise argparse.ArgumentError(None, f"{option_string} is no longer taken; {self.use}")


def add_replaced(parser: argparse.ArgumentParser, *old: str, use: str) -> None:
    """Refuse the old spellings ``old`` (hidden from help) with a message saying ``use``."""
    parser.add_argument(*old, action=_Replaced, use=use)


def deprecated_parser(sub: Any, old: str, new: str, *, name: str | None = None
                      ) -> argparse.ArgumentParser:
    """A parser for the retired spelling ``old`` of the command ``new`` (both written in full,
    ``"asyncq queue rm"``; ``name``, the retired word, defaults to the last of ``old``):
    hidden from help, it takes the same arguments once the caller adds them, and
    :func:`warn_deprecated` runs before its command (one word per concept on every surface;
    old spellings keep working for one release)."""
    parser: argparse.ArgumentParser = sub.add_parser(name or old.rsplit(" ", 1)[-1])
    parser.set_defaults(deprecated=(old, new))
    return parser


def warn_deprecated(args: argparse.Namespace) -> None:
    """Say on stderr, in one line, that the spelling the command was given is retired and
    which one to use (nothing for a current spelling)."""
    old_new: tuple[str, str] | None = getattr(args, "deprecated", None)
    if old_new is not None:
        from .._inspector._retired import REMOVED_IN

        old, new = old_new
        print(f"asyncq: warning: '{old}' is deprecated and is removed in {REMOVED_IN}; "
              f"use '{new}'", file=sys.stderr)


def add_redis_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis-url", "-u", default=os.environ.get(REDIS_URL_ENV, DEFAULT_REDIS_URL),
        help=f"Redis URL (env {REDIS_URL_ENV}; default {DEFAULT_REDIS_URL}): redis://, "
             "rediss:// (TLS), unix://, redis+cluster://h1:p1,h2:p2, "
             "redis+sentinel://h1:p1,h2:p2/service; options as query parameters, e.g. "
             "?ssl_ca_certs=ca.pem&socket_timeout=2")


def add_log_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"], help="default: info")
    parser.add_argument("--log-format", default=None, choices=["console", "json"],
                        help="default: console on a terminal, json otherwise")


def import_object(path: str) -> Any:
    """Import ``module:attr`` (``module.attr`` also accepted) from the current directory too."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise CLIError(f"expected module:attribute, got {path!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CLIError(f"cannot import {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CLIError(f"module {module_name!r} has no attribute {attr!r}") from None
    return obj


def parse_queue_weights(values: list[str] | None) -> dict[str, int] | None:
    """``["critical=6", "default"]`` -> ``{"critical": 6, "default": 1}``; the weight follows
    the last ``=`` (a name holding ``=``, as Go's layout allows, is given its weight:
    ``a=b=1``)."""
    if not values:
        return None
    queues: dict[str, int] = {}
    for value in values:
        name, sep, weight = value.rpartition("=") if "=" in value else (value, "", "")
        try:
            queues[name] = int(weight) if sep else 1
        except ValueError:
            raise CLIError(f"--queue expects NAME=WEIGHT with an integer weight, "
                           f"got {value!r}") from None
    return queues


async def check_redis(url: str) -> None:
    """Fail fast with a one-line error when Redis cannot be reached at start-up."""
    from .._broker import check_reachable  # (redis-py: only when a command runs)
    from .._errors import BrokerError

    try:
        await check_reachable(url)
    except (ValueError, TypeError, BrokerError) as exc:
        raise CLIError(str(exc)) from None

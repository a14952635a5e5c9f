"""``asyncq dash [--refresh SECONDS]``: a live terminal view of queues and workers (curses).

Quits on ``q`` or Ctrl-C with exit code 0 and the terminal restored; a window too small for the
view shows a message instead. Redis errors while running are shown on screen, not fatal. The
screen itself (``_dash_screen``: curses, asyncio, the Inspector) is imported when it runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import CLIError, add_redis_args


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "dash", help="live terminal view of queues and workers (q or Ctrl-C quits)")
    add_redis_args(p)
    p.add_argument("--refresh", "-r", type=float, default=2.0,
                   help="seconds between refreshes (default 2)")
    p.add_argument("--queue", "-q", action="append", default=[], metavar="QUEUE",
                   help="show only this queue (repeatable; default: every queue)")
    p.set_defaults(func=cmd_dash)


def cmd_dash(args: argparse.Namespace) -> int:
    """Check the flags and the terminal here (no screen needed to refuse), then run the view."""
    if not args.refresh > 0:
        raise CLIError(f"--refresh must be > 0, got {args.refresh}")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CLIError("asyncq dash needs a terminal; use `asyncq stats` in scripts")
    from ._dash_screen import run_dash

    return run_dash(args)

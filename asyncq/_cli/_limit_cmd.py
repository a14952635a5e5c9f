"""``asyncq limit ls [-q Q]``: each rate and concurrency limit, per key, with its use now."""

from __future__ import annotations

import argparse
from typing import Any

from .._inspector._inspector import Inspector
from .._limits import LimitUse
from ._output import add_common_args, print_json, print_table, run_inspector, say


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("limit", help="look at rate and concurrency "
                                                "limits")
    lsub = p.add_subparsers(dest="limit_command", metavar="SUBCOMMAND", required=True)
    ls = lsub.add_parser("ls", help="list the limits in use and what each key uses now")
    ls.add_argument("--queue", "-q", help="only this queue (default: every queue)")
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)


def limit_text(use: LimitUse) -> str:
    """``5`` (at once) or ``100/1s`` (starts per period)."""
    if use.kind == "rate":
        return f"{use.limit}/{use.period_ms / 1000:g}s"
    return str(use.limit)


def cmd_ls(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        uses = await inspector.limits(args.queue)
        if args.json:
            print_json([u._asdict() for u in uses])
        elif not uses:
            say("no limits in use" + (f" in queue {args.queue}" if args.queue else ""))
        else:
            print_table(["QUEUE", "KIND", "NAME", "KEY", "LIMIT", "IN USE", "WAITING"],
                        [[u.queue, u.kind, u.name, u.key or "-", limit_text(u), u.in_use,
                          u.waiting] for u in uses])
        return 0

    return run_inspector(args, body)

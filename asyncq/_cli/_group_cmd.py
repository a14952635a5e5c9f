"""``asyncq group ls -q Q``: the groups of a queue and their sizes."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._output import add_common_args, print_json, print_table, run_inspector, say

if TYPE_CHECKING:
    from .._inspector._inspector import Inspector


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("group", help="look at task groups")
    gsub = p.add_subparsers(dest="group_command", metavar="SUBCOMMAND", required=True)
    ls = gsub.add_parser("ls", help="list the groups of a queue")
    ls.add_argument("--queue", "-q", required=True, help="queue name")
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)


def cmd_ls(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        groups = await inspector.groups(args.queue)
        if args.json:
            print_json(groups)
        elif not groups:
            say(f"no groups in queue {args.queue}")
        else:
            print_table(["GROUP", "SIZE"], [[g.group, g.size] for g in groups])
        return 0

    return run_inspector(args, body)

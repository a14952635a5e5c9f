"""``asyncq server ls``: live worker processes and what they run."""

from __future__ import annotations

import argparse
from typing import Any

from .._inspector._inspector import Inspector
from ._output import (
    add_common_args,
    fmt_time,
    print_json,
    print_table,
    run_inspector,
    say,
    server_doc,
)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("server", help="look at worker processes")
    ssub = p.add_subparsers(dest="server_command", metavar="SUBCOMMAND", required=True)
    ls = ssub.add_parser("ls", help="list live worker processes")
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)


def queues_text(queues: dict[str, int]) -> str:
    return ", ".join(f"{q}={w}" for q, w in sorted(queues.items()))


def cmd_ls(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        servers = await inspector.servers()
        if args.json:
            print_json([server_doc(s) for s in servers])
        elif not servers:
            say("no live servers")
        else:
            print_table(
                ["ID", "HOST", "PID", "STATUS", "ACTIVE", "QUEUES", "STARTED"],
                [[s.id, s.host, s.pid, s.status, f"{len(s.active_workers)}/{s.concurrency}",
                  queues_text(dict(s.queues)), fmt_time(s.started)] for s in servers])
        return 0

    return run_inspector(args, body)

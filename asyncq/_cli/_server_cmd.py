"""``asyncq server ls``: live worker processes and what they run."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._output import (
    add_common_args,
    fmt_time,
    print_json,
    print_table,
    run_inspector,
    say,
    server_doc,
)

if TYPE_CHECKING:
    from .._broker import ServerInfo
    from .._inspector._inspector import Inspector


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("server", help="look at worker processes")
    ssub = p.add_subparsers(dest="server_command", metavar="SUBCOMMAND", required=True)
    ls = ssub.add_parser("ls", help="list live worker processes")
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)


#: Queues a pattern matches named in the table (all of them in --json).
SHOWN_MATCHES = 3


def queues_text(queues: dict[str, int],
                matched: Mapping[str, Sequence[str]] | None = None) -> str:
    """``critical=6, tenant:*=1 [2: tenant:a, tenant:b]``: each queue or pattern with its
    weight, a pattern followed by how many queues it matches and the first of them."""
    parts = []
    for q, w in sorted(queues.items()):
        text = f"{q}={w}"
        if matched is not None and q in matched:
            found = matched[q]
            names = ", ".join(found[:SHOWN_MATCHES]) + (", …" if len(found) > SHOWN_MATCHES
                                                        else "")
            text += f" [{len(found)}{': ' + names if found else ''}]"
        parts.append(text)
    return ", ".join(parts)


async def patterns_matched(inspector: Inspector, servers: Sequence[ServerInfo]
                           ) -> dict[str, dict[str, list[str]]]:
    """For each server serving a pattern (``tenant:*``), the registered queues each of its
    patterns matches, by server id; the registry is read only when some server has one."""
    from .._validate import is_queue_pattern, match_queue_patterns

    if not any(is_queue_pattern(q) for s in servers for q in s.queues):
        return {}
    names = await inspector.queues()
    return {s.id: match_queue_patterns(s.queues, names) for s in servers
            if any(is_queue_pattern(q) for q in s.queues)}


def cmd_ls(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        servers = await inspector.servers()
        matched = await patterns_matched(inspector, servers)
        if args.json:
            print_json([server_doc(s) | ({"matched": matched[s.id]} if s.id in matched else {})
                        for s in servers])
        elif not servers:
            say("no live servers")
        else:
            print_table(
                ["ID", "HOST", "PID", "STATUS", "ACTIVE", "QUEUES", "STARTED"],
                [[s.id, s.host, s.pid, s.status, f"{len(s.active_workers)}/{s.concurrency}",
                  queues_text(dict(s.queues), matched.get(s.id)), fmt_time(s.started)]
                 for s in servers])
        return 0

    return run_inspector(args, body)

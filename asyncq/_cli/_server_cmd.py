"""``asyncq worker ls``: live worker processes and what they run (``asyncq server ls``, its
retired spelling, still works for one release)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._common import deprecated_parser
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
    ls: argparse.ArgumentParser = sub.add_parser(
        "worker ls", help="list live worker processes and the tasks they run")
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)

    old = deprecated_parser(sub, "asyncq server", "asyncq worker ls")
    osub = old.add_subparsers(dest="server_command", metavar="SUBCOMMAND", required=True)
    old_ls = deprecated_parser(osub, "asyncq server ls", "asyncq worker ls")
    add_common_args(old_ls)
    old_ls.set_defaults(func=cmd_ls)


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
    """For each worker serving a pattern (``tenant:*``), the registered queues each of its
    patterns matches, by worker id; the registry is read only when some worker has one."""
    from .._validate import is_queue_pattern, match_queue_patterns

    if not any(is_queue_pattern(q) for s in servers for q in s.queues):
        return {}
    names = await inspector.queues()
    return {s.id: match_queue_patterns(s.queues, names) for s in servers
            if any(is_queue_pattern(q) for q in s.queues)}


def cmd_ls(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        servers = await inspector.workers()
        matched = await patterns_matched(inspector, servers)
        if args.json:
            print_json([server_doc(s) | ({"matched": matched[s.id]} if s.id in matched else {})
                        for s in servers])
        elif not servers:
            say("no live workers")
        else:
            print_table(
                ["ID", "HOST", "PID", "STATUS", "ACTIVE", "QUEUES", "STARTED"],
                [[s.id, s.host, s.pid, s.status, f"{len(s.active_workers)}/{s.concurrency}",
                  queues_text(dict(s.queues), matched.get(s.id)), fmt_time(s.started)]
                 for s in servers])
        return 0

    return run_inspector(args, body)

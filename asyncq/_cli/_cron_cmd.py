"""``asyncq cron ls|history``: the periodic entries of running schedulers and their enqueues."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from .._broker import RedisBroker
from .._connection import make_broker
from .._scheduler import SchedulerEntry, list_scheduler_entries, list_scheduler_events
from ._common import add_redis_args, check_redis
from ._output import PAYLOAD_WIDTH, bytes_doc, fmt_time, print_json, print_table

T = TypeVar("T")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "cron", help="periodic entries of running schedulers and their enqueue history")
    csub = p.add_subparsers(dest="cron_command", metavar="SUBCOMMAND", required=True)

    ls = csub.add_parser("ls", help="list the entries of every running scheduler")
    _common(ls)
    ls.set_defaults(func=cmd_ls)

    history = csub.add_parser("history", help="tasks enqueued by an entry, newest first")
    history.add_argument("entry_id", metavar="ENTRY_ID")
    history.add_argument("--page", type=int, default=1, help="page number, from 1 (default 1)")
    history.add_argument("--size", type=int, default=30, help="events per page (default 30)")
    _common(history)
    history.set_defaults(func=cmd_history)


def _common(parser: argparse.ArgumentParser) -> None:
    add_redis_args(parser)
    parser.add_argument("--json", action="store_true",
                        help="print machine-readable JSON instead of a table")


def _with_broker(url: str, body: Callable[[RedisBroker], Awaitable[T]]) -> T:
    async def main() -> T:
        await check_redis(url)
        broker = make_broker(url)
        try:
            return await body(broker)
        finally:
            await broker.close()

    return asyncio.run(main())


def entry_doc(e: SchedulerEntry) -> dict[str, Any]:
    payload, payload_enc = bytes_doc(e.payload, e.encoding)
    return {
        "id": e.id, "spec": e.spec, "timezone": e.timezone, "type": e.type,
        "payload": payload, "payload_encoding": payload_enc, "options": dict(e.options),
        "next_enqueue_at": e.next_enqueue_at, "prev_enqueue_at": e.prev_enqueue_at,
        "scheduler_id": e.scheduler_id,
    }


def _short(text: str, width: int = PAYLOAD_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def cmd_ls(args: argparse.Namespace) -> int:
    entries = _with_broker(args.redis_url, list_scheduler_entries)
    if args.json:
        print_json([entry_doc(e) for e in entries])
        return 0
    if not entries:
        print("no scheduler entries (no scheduler is running, or none has entries)")
        return 0
    # Replicas publish the same entry: one row per entry id, with how many schedulers run it.
    rows: dict[str, list[Any]] = {}
    for e in entries:
        row = rows.get(e.id)
        if row is not None:
            row[-1] += 1
            continue
        value, kind = bytes_doc(e.payload, e.encoding)
        payload = "-" if kind == "none" else (orjson.dumps(value).decode() if kind == "json"
                                              else repr(value))
        options = orjson.dumps(dict(e.options)).decode() if e.options else "-"
        rows[e.id] = [e.id, e.spec, e.timezone, e.type, _short(payload), _short(options),
                      fmt_time(e.next_enqueue_at), fmt_time(e.prev_enqueue_at), 1]
    print_table(["ENTRY ID", "SPEC", "TIMEZONE", "TYPE", "PAYLOAD", "OPTIONS", "NEXT", "PREV",
                 "SCHEDULERS"], list(rows.values()))
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    if args.page < 1 or args.size < 1:
        raise ValueError("--page and --size must be >= 1")
    events = _with_broker(args.redis_url, lambda broker: list_scheduler_events(
        broker, args.entry_id, args.page, args.size))
    if args.json:
        print_json([{"entry_id": ev.entry_id, "task_id": ev.task_id, "queue": ev.queue,
                     "enqueued_at": ev.enqueued_at, "tick_at": ev.tick_at} for ev in events])
        return 0
    if not events:
        print(f"no enqueue events for entry {args.entry_id} on page {args.page}")
        return 0
    print_table(["TASK ID", "QUEUE", "ENQUEUED AT", "TICK"],
                [[ev.task_id, ev.queue, fmt_time(ev.enqueued_at), fmt_time(ev.tick_at)]
                 for ev in events])
    return 0

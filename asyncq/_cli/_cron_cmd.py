"""``asyncq scheduler ls|history``: the entries of running schedulers and the tasks they
enqueued (``asyncq cron ls|history``, the retired spelling, still works for one release)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._common import deprecated_parser
from ._output import (
    PAYLOAD_WIDTH,
    add_common_args,
    bytes_doc,
    compact_json,
    fmt_time,
    object_doc,
    print_json,
    print_table,
    run_inspector,
    say,
)

if TYPE_CHECKING:
    from .._inspector._inspector import Inspector
    from .._scheduler import SchedulerEntry, SchedulerEvent


def register(sub: Any) -> None:
    ls: argparse.ArgumentParser = sub.add_parser(
        "scheduler ls", help="list the entries of every running scheduler")
    _ls_args(ls)
    history: argparse.ArgumentParser = sub.add_parser(
        "scheduler history", help="tasks a scheduler entry enqueued, newest first")
    _history_args(history)

    old = deprecated_parser(sub, "asyncq cron", "asyncq scheduler ls|history")
    osub = old.add_subparsers(dest="cron_command", metavar="SUBCOMMAND", required=True)
    _ls_args(deprecated_parser(osub, "asyncq cron ls", "asyncq scheduler ls"))
    _history_args(deprecated_parser(osub, "asyncq cron history", "asyncq scheduler history"))


def _ls_args(ls: argparse.ArgumentParser) -> None:
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)


def _history_args(history: argparse.ArgumentParser) -> None:
    history.add_argument("entry_id", metavar="ENTRY_ID")
    history.add_argument("--page", type=int, default=1, help="page number, from 1 (default 1)")
    history.add_argument("--size", type=int, default=30, help="events per page (default 30)")
    add_common_args(history)
    history.set_defaults(func=cmd_history)


def entry_doc(e: SchedulerEntry) -> dict[str, Any]:
    return object_doc(e)


def _short(text: str, width: int = PAYLOAD_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def cmd_ls(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        _print_entries(args, await inspector.scheduler_entries())
        return 0

    return run_inspector(args, body)


def _print_entries(args: argparse.Namespace, entries: list[SchedulerEntry]) -> None:
    if args.json:
        print_json([entry_doc(e) for e in entries])
        return
    if not entries:
        say("no scheduler entries (no scheduler is running, or none has entries)")
        return
    # Replicas publish the same entry: one row per entry id, with how many schedulers run it.
    rows: dict[str, list[Any]] = {}
    for e in entries:
        row = rows.get(e.id)
        if row is not None:
            row[-1] += 1
            continue
        value, kind = bytes_doc(e.payload, e.encoding)
        payload = "-" if kind == "none" else (compact_json(value) if kind == "json"
                                              else repr(value))
        options = compact_json(dict(e.options)) if e.options else "-"
        rows[e.id] = [e.id, e.spec, e.timezone, e.type, _short(payload), _short(options),
                      fmt_time(e.next_enqueue_at), fmt_time(e.prev_enqueue_at), 1]
    print_table(["ENTRY ID", "SPEC", "TIMEZONE", "TYPE", "PAYLOAD", "OPTIONS", "NEXT", "PREV",
                 "SCHEDULERS"], list(rows.values()))


def cmd_history(args: argparse.Namespace) -> int:
    if args.page < 1 or args.size < 1:
        raise ValueError("--page and --size must be >= 1")

    async def body(inspector: Inspector) -> int:
        _print_events(args, await inspector.scheduler_history(args.entry_id, args.page,
                                                              args.size))
        return 0

    return run_inspector(args, body)


def _print_events(args: argparse.Namespace, events: list[SchedulerEvent]) -> None:
    if args.json:
        print_json([object_doc(ev) for ev in events])
        return
    if not events:
        say(f"no enqueue events for entry {args.entry_id} on page {args.page}")
        return
    print_table(["TASK ID", "QUEUE", "ENQUEUED AT", "TICK"],
                [[ev.task_id, ev.queue, fmt_time(ev.enqueued_at), fmt_time(ev.tick_at)]
                 for ev in events])

"""``asyncq queue ls|inspect|history|pause|unpause|delete|archive-limits|concurrency``: look
at and manage queues (``queue rm`` and ``queue limit``, retired spellings, still work for one
release)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._common import CLIError, deprecated_parser
from ._output import (
    add_common_args,
    fmt_bytes,
    fmt_duration,
    print_fields,
    print_json,
    print_table,
    queue_doc,
    run_inspector,
    say,
)

if TYPE_CHECKING:
    from .._inspector._inspector import Inspector


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("queue", help="look at and manage queues")
    qsub = p.add_subparsers(dest="queue_command", metavar="SUBCOMMAND", required=True)

    ls = qsub.add_parser("ls", help="list queue names")
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)

    inspect = qsub.add_parser("inspect", help="sizes, counters, latency and memory of queues")
    inspect.add_argument("queues", nargs="+", metavar="QUEUE")
    add_common_args(inspect)
    inspect.set_defaults(func=cmd_inspect)

    history = qsub.add_parser("history", help="processed/failed per day")
    history.add_argument("queues", nargs="+", metavar="QUEUE")
    history.add_argument("--days", "-x", type=int, default=10, help="days to show (default 10)")
    add_common_args(history)
    history.set_defaults(func=cmd_history)

    for name, func, text in (("pause", cmd_pause, "stop workers from taking tasks"),
                             ("unpause", cmd_unpause, "let workers take tasks again")):
        cmd = qsub.add_parser(name, help=f"{text} of queues")
        cmd.add_argument("queues", nargs="+", metavar="QUEUE")
        add_common_args(cmd, json=False)
        cmd.set_defaults(func=func)

    limits = qsub.add_parser(
        "archive-limits", help="show or set the limits of queues' archives (beyond them the "
                               "oldest archived tasks are deleted)")
    limits.add_argument("queues", nargs="+", metavar="QUEUE")
    limits.add_argument("--max-size", type=int, default=None, metavar="N",
                        help="keep at most N archived tasks (default 10000)")
    limits.add_argument("--max-age", type=float, default=None, metavar="SECONDS",
                        help="delete archived tasks older than this (default 90 days)")
    limits.add_argument("--default", action="store_true",
                        help="put both limits back to their defaults")
    add_common_args(limits)
    limits.set_defaults(func=cmd_archive_limits)

    concurrency = qsub.add_parser(
        "concurrency", help="show or set the queue concurrency limit: how many tasks of the "
                            "queue run at once across every worker (applies from the next "
                            "start, no restart)")
    _concurrency_args(concurrency, "--limit")
    old_limit = deprecated_parser(qsub, "asyncq queue limit --concurrency N",
                                  "asyncq queue concurrency --limit N", name="limit")
    _concurrency_args(old_limit, "--concurrency")

    delete = qsub.add_parser("delete", help="delete queues")
    _delete_args(delete)
    for old in ("rm", "remove"):
        _delete_args(deprecated_parser(qsub, f"asyncq queue {old}", "asyncq queue delete"))


def _concurrency_args(p: argparse.ArgumentParser, flag: str) -> None:
    p.add_argument("queues", nargs="+", metavar="QUEUE")
    change = p.add_mutually_exclusive_group()
    change.add_argument(flag, dest="limit", type=int, default=None, metavar="N",
                        help="let at most N tasks of the queue run at once (a raise starts "
                             "waiting tasks at once; a cut stops nothing that runs)")
    change.add_argument("--clear", action="store_true",
                        help="clear the queue's concurrency limit")
    add_common_args(p)
    p.set_defaults(func=cmd_concurrency, flag=flag)


def _delete_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("queues", nargs="+", metavar="QUEUE")
    p.add_argument("--force", "-f", action="store_true",
                   help="also delete the tasks the queue still holds (never running ones)")
    add_common_args(p, json=False)
    p.set_defaults(func=cmd_delete)


def cmd_ls(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        names = await inspector.queues()
        if args.json:
            print_json(names)
        else:
            for name in names:
                say(name)
        return 0

    return run_inspector(args, body)


def cmd_inspect(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        infos = [await inspector.queue_info(q) for q in args.queues]
        if args.json:
            print_json([queue_doc(i) for i in infos])
            return 0
        for n, i in enumerate(infos):
            if n:
                say()
            say(f"Queue {i.queue}")
            print_fields([
                ("paused", "yes" if i.paused else "no"),
                ("size", i.size),
                ("latency", fmt_duration(i.latency)),
                ("memory", fmt_bytes(i.memory_usage)),
                ("groups", i.groups),
                ("processed today", i.processed),
                ("failed today", i.failed),
                ("processed total", i.processed_total),
                ("failed total", i.failed_total),
                ("expired leases", i.expired_leases),
                ("expired tasks", i.expired_total),
                ("concurrency", limit_text(i.concurrency_limit, i.concurrency_in_use,
                                             i.concurrency_waiting)),
            ])
            say()
            print_table(["PENDING", "ACTIVE", "SCHEDULED", "RETRY", "ARCHIVED", "COMPLETED",
                         "AGGREGATING"],
                        [[i.pending, i.active, i.scheduled, i.retry, i.archived, i.completed,
                          i.aggregating]])
        return 0

    return run_inspector(args, body)


def cmd_history(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        rows = [s for q in args.queues for s in await inspector.history(q, args.days)]
        if args.json:
            print_json(rows)
            return 0
        print_table(["QUEUE", "DATE", "PROCESSED", "FAILED", "ERROR RATE"], [
            [s.queue, s.date.isoformat(), s.processed, s.failed,
             f"{100 * s.failed / s.processed:.2f}%" if s.processed else "-"]
            for s in rows
        ])
        return 0

    return run_inspector(args, body)


def cmd_pause(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        for q in args.queues:
            changed = await inspector.pause(q)
            say(f"paused queue {q}" if changed else f"queue {q} was already paused")
        return 0

    return run_inspector(args, body)


def cmd_unpause(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        for q in args.queues:
            changed = await inspector.unpause(q)
            say(f"unpaused queue {q}" if changed else f"queue {q} was not paused")
        return 0

    return run_inspector(args, body)


def cmd_delete(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        for q in args.queues:
            await inspector.delete_queue(q, force=args.force)
            say(f"deleted queue {q}")
        return 0

    return run_inspector(args, body)


def cmd_archive_limits(args: argparse.Namespace) -> int:
    """Without options, each queue's archive limits; with them, set (the archive is trimmed
    to the new limits at once, and the count deleted said)."""
    setting = args.default or args.max_size is not None or args.max_age is not None
    if args.default and (args.max_size is not None or args.max_age is not None):
        raise CLIError("--default resets both limits: give it alone")

    async def body(inspector: Inspector) -> int:
        docs = []
        for queue in args.queues:
            trimmed = 0
            if setting:
                current = await inspector.archive_limits(queue)
                trimmed = await inspector.set_archive_limits(
                    queue,
                    max_size=None if args.default else (
                        args.max_size if args.max_size is not None
                        else current.max_size if current.custom else None),
                    max_age=None if args.default else (
                        args.max_age if args.max_age is not None
                        else current.max_age if current.custom else None))
            limits = await inspector.archive_limits(queue)
            docs.append({"queue": queue, "max_size": limits.max_size,
                         "max_age_s": limits.max_age.total_seconds(),
                         "custom": limits.custom, "trimmed": trimmed})
            if not args.json:
                say(f"queue {queue}: archive keeps at most {limits.max_size} tasks, none older "
                    f"than {fmt_duration(limits.max_age)}"
                    f"{'' if limits.custom else ' (the defaults)'}")
                if trimmed:
                    say(f"  the {trimmed} oldest archived task(s) were deleted to fit")
        if args.json:
            print_json(docs)
        return 0

    return run_inspector(args, body)


def limit_text(limit: int | None, in_use: int = 0, waiting: int = 0, *,
             counts: bool = True) -> str:
    """``at most 3 at once (2 running, 5 waiting)``, or ``none``."""
    if limit is None:
        return "none"
    return f"at most {limit} at once" + (f" ({in_use} running, {waiting} waiting)"
                                         if counts else "")


def cmd_concurrency(args: argparse.Namespace) -> int:
    """Without options, each queue's concurrency limit and what it counts; with one, set or
    clear it (saying the limit it had, and the waiting tasks the change started)."""
    changing = args.clear or args.limit is not None

    async def body(inspector: Inspector) -> int:
        docs = []
        for queue in args.queues:
            before = await inspector.queue_concurrency(queue)
            started = 0
            if args.clear:
                started = await inspector.clear_queue_concurrency(queue)
            elif args.limit is not None:
                try:
                    started = await inspector.set_queue_concurrency(queue, args.limit)
                except ValueError as exc:
                    raise CLIError(f"{args.flag}: {exc}") from exc
            now = await inspector.queue_concurrency(queue) if changing else before
            limit = now.limit if now else None
            in_use, waiting = (now.in_use, now.waiting) if now else (0, 0)
            docs.append({"queue": queue, "concurrency_limit": limit,
                         "concurrency_in_use": in_use, "concurrency_waiting": waiting,
                         "previous_limit": before.limit if before else None,
                         "started": started})
            if args.json:
                continue
            was = limit_text(before.limit if before else None, counts=False)
            say(f"queue {queue}: concurrency limit {limit_text(limit, in_use, waiting)}"
                + (f" (was {was})" if changing else ""))
            if started:
                say(f"  {started} waiting task(s) started")
        if args.json:
            print_json(docs)
        return 0

    return run_inspector(args, body)

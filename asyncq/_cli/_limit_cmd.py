"""``asyncq limit ls|set|clear``: each rate and concurrency limit, per key, with its use now;
an operator's value replacing a declared limit until cleared."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .._defaults import DEFAULT_QUEUE
from ._common import CLIError
from ._output import add_common_args, print_json, print_table, run_inspector, say

if TYPE_CHECKING:
    from .._inspector._inspector import Inspector
    from .._limits import Limit, LimitUse


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("limit", help="look at and change rate and "
                                                "concurrency limits")
    lsub = p.add_subparsers(dest="limit_command", metavar="SUBCOMMAND", required=True)
    ls = lsub.add_parser("ls", help="list the limits in use and what each key uses now")
    ls.add_argument("--queue", "-q", help="only this queue (default: every queue)")
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)

    put = lsub.add_parser(
        "set", help="replace what the handlers declare for a limit, until cleared (the next "
                    "start obeys it: no restart)")
    put.add_argument("name", metavar="NAME", help="the limit's name (its name=, else the "
                                                  "pattern its handler is registered for)")
    kind = put.add_mutually_exclusive_group()
    kind.add_argument("--concurrency", type=int, metavar="N", help="at most N at once")
    kind.add_argument("--rate", metavar="RATE", help="at most this many starts per period: "
                                                     "100/s, 600/m, 5000/h, 10/5m")
    put.add_argument("--burst", type=int, metavar="N", help="with --rate: how many may start "
                                                            "at once (default: a tenth)")
    put.add_argument("--queue", "-q", default=DEFAULT_QUEUE,
                     help=f"the queue the limit is counted in (default {DEFAULT_QUEUE})")
    add_common_args(put)
    put.set_defaults(func=cmd_set)

    clear = lsub.add_parser("clear", help="drop the value 'limit set' gave a limit: what the "
                                          "handlers declare applies again")
    clear.add_argument("name", metavar="NAME")
    clear.add_argument("--kind", required=True, choices=["concurrency", "rate"])
    clear.add_argument("--queue", "-q", default=DEFAULT_QUEUE,
                       help=f"the queue the limit is counted in (default {DEFAULT_QUEUE})")
    add_common_args(clear)
    clear.set_defaults(func=cmd_clear)


def limit_text(use: LimitUse) -> str:
    """``5`` (at once) or ``100/1s`` (starts per period)."""
    return size_text(use.kind, use.limit, use.period_ms)


def size_text(kind: str, n: int | None, period_ms: int | None) -> str:
    if n is None:
        return "-"
    if kind == "rate":
        return f"{n}/{(period_ms or 0) / 1000:g}s"
    return str(n)


def set_by(use: LimitUse) -> str:
    """Who set the limit in force: ``code``, or ``operator`` (with what the code declares)."""
    if not use.runtime:
        return "code"
    if use.declared is None:
        return "operator"
    return f"operator (code: {size_text(use.kind, use.declared, use.declared_period_ms)})"


def cmd_ls(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        uses = await inspector.limits(args.queue)
        if args.json:
            print_json([u._asdict() for u in uses])
        elif not uses:
            say("no limits in use" + (f" in queue {args.queue}" if args.queue else ""))
        else:
            print_table(["QUEUE", "KIND", "NAME", "KEY", "LIMIT", "SET BY", "IN USE",
                         "WAITING"],
                        [[u.queue, u.kind, u.name or "-", u.key or "-", limit_text(u),
                          set_by(u), u.in_use, u.waiting] for u in uses])
        return 0

    return run_inspector(args, body)


def _limit_of(args: argparse.Namespace) -> Limit:
    """The limit ``limit set`` gives, from its flags (CLIError when they do not make one)."""
    from .._limits import ConcurrencyLimit, RateLimit

    if args.rate is None and args.concurrency is None:
        raise CLIError("give the limit's new value: --concurrency N or --rate RATE")
    try:
        if args.rate is not None:
            return RateLimit(args.rate, name=args.name, burst=args.burst)
        if args.burst is not None:
            raise CLIError("--burst goes with --rate")
        return ConcurrencyLimit(args.concurrency, name=args.name)
    except (TypeError, ValueError) as exc:
        raise CLIError(str(exc)) from exc


def cmd_set(args: argparse.Namespace) -> int:
    limit = _limit_of(args)

    async def body(inspector: Inspector) -> int:
        started = await inspector.set_limit(args.queue, limit)
        return await _report(inspector, args, limit.kind, started)

    return run_inspector(args, body)


def cmd_clear(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        started = await inspector.clear_limit(args.queue, args.kind, args.name)
        return await _report(inspector, args, args.kind, started)

    return run_inspector(args, body)


async def _report(inspector: Inspector, args: argparse.Namespace, kind: str,
                  started: int) -> int:
    """What the limit is now, who set it, and the waiting tasks the change started."""
    uses = [u for u in await inspector.limits(args.queue)
            if u.kind == kind and u.name == args.name]
    if args.json:
        print_json({"queue": args.queue, "kind": kind, "name": args.name,
                    "limit": uses[0].limit if uses else None,
                    "period_ms": uses[0].period_ms if uses else None,
                    "runtime": bool(uses) and uses[0].runtime, "started": started})
        return 0
    if not uses:
        say(f"{kind} limit {args.name!r} of queue {args.queue}: no value set at run time, "
            f"and no handler declared it yet")
    else:
        use = uses[0]
        say(f"{kind} limit {args.name!r} of queue {args.queue}: {limit_text(use)}, set by "
            f"{set_by(use)}")
        if use.runtime and use.declared is None:
            say("  note: no worker has claimed a limit of that kind and name in this queue "
                "yet; the value applies once one does")
    if started:
        say(f"  {started} waiting task(s) started")
    return 0

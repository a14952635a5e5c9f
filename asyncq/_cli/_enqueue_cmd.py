"""``asyncq task enqueue -t TYPE [-l PAYLOAD] [options]``: enqueue a task from the shell, with
the options of ``Client.enqueue`` under the same names."""

from __future__ import annotations

import argparse
import re
from datetime import datetime
from typing import Any

from .._defaults import DEFAULT_MAX_RETRY, DEFAULT_QUEUE, DEFAULT_TIMEOUT_MS, RESULT_RETENTION
from ._common import CLIError, add_replaced, check_redis
from ._output import add_common_args, print_json, say, task_doc

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """``90`` (seconds), ``90s``, ``1h30m``, ``250ms``, ``2d`` -> seconds (checked by the rule of
    every asyncq duration: finite, >= 0, at most 10 000 years)."""
    from .._validate import to_seconds

    value = text.strip()
    try:
        total = float(value)
    except ValueError:
        pos, total = 0, 0.0
        for m in _DURATION_PART.finditer(value):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
            pos = m.end()
        if pos != len(value) or not value:
            raise argparse.ArgumentTypeError(
                f"invalid duration {text!r}: use seconds or units like 90s, 5m, 1h30m, 250ms, "
                "2d") from None
    try:
        return to_seconds(total, "duration")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: {exc}") from None


def parse_time(text: str) -> datetime:
    """An RFC 3339 time with a zone, e.g. ``2026-05-01T12:00:00Z``."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid time {text!r}: use RFC 3339, e.g. 2026-05-01T12:00:00Z") from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"time {text!r} has no zone: add Z or an offset such as +02:00")
    return when


def parse_header(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (the value may hold ``=``) -> ``(NAME, VALUE)``."""
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"invalid header {text!r}: use NAME=VALUE")
    return name, value


def register(tsub: Any) -> None:
    p: argparse.ArgumentParser = tsub.add_parser(
        "enqueue", help="enqueue a task",
        description=f"Enqueue a task, as Client.enqueue(type, payload, **options) does: each "
                    f"option is named as the keyword it sets (--max-retry is max_retry). Only "
                    f"the options given are set; the others take the handler's registered "
                    f"options or the defaults (queue {DEFAULT_QUEUE}, {DEFAULT_MAX_RETRY} "
                    f"retries, {DEFAULT_TIMEOUT_MS // 60_000} min timeout).")
    p.add_argument("--type", "-t", required=True, help="task type")
    p.add_argument("--payload", "-l", help="payload as JSON text (see --bytes)")
    p.add_argument("--bytes", action="store_true", help="send the payload text as raw bytes")
    p.add_argument("--queue", "-q", help=f"queue (default: {DEFAULT_QUEUE})")
    p.add_argument("--max-retry", type=int, metavar="N",
                   help=f"most retries (default: the handler's, else {DEFAULT_MAX_RETRY})")
    p.add_argument("--timeout", type=parse_duration, metavar="DURATION",
                   help=f"handler time limit, e.g. 5m (0: no limit; default: the handler's, "
                        f"else {DEFAULT_TIMEOUT_MS // 60_000}m)")
    p.add_argument("--deadline", type=parse_time, metavar="TIME", help="RFC 3339 deadline")
    p.add_argument("--process-at", type=parse_time, metavar="TIME",
                   help="RFC 3339 time to run at")
    p.add_argument("--process-in", type=parse_duration, metavar="DURATION",
                   help="delay before running, e.g. 10m")
    p.add_argument("--expires-in", type=parse_duration, metavar="DURATION",
                   help="not started within this long (from now), it never runs: archived as "
                        "expired, e.g. 5m")
    p.add_argument("--expires-at", type=parse_time, metavar="TIME",
                   help="RFC 3339 time by which it must have started, else it never runs")
    p.add_argument("--unique", type=parse_duration, metavar="TTL",
                   help="refuse a duplicate for this long, e.g. 1h (at least 1s)")
    p.add_argument("--unique-key", metavar="KEY",
                   help="what makes a duplicate (needs --unique; default: type and payload)")
    p.add_argument("--task-id", metavar="ID", help="task id (default: a new UUID)")
    p.add_argument("--retention", type=parse_duration, metavar="DURATION",
                   help=f"how long the task is kept once completed, e.g. 24h (default: the "
                        f"handler's, else {RESULT_RETENTION / 60:g}m for a returned value)")
    p.add_argument("--group", "-g", help="group to aggregate with")
    p.add_argument("--header", type=parse_header, action="append", metavar="NAME=VALUE",
                   help="a header given to middleware (repeatable)")
    p.add_argument("--after", action="append", metavar="ID",
                   help="a task of the same queue that must succeed first (repeatable)")
    add_replaced(p, "--retry", use="use --max-retry N, named as Client.enqueue's max_retry")
    add_replaced(p, "--id", use="use --task-id ID, named as Client.enqueue's task_id")
    add_common_args(p)
    p.set_defaults(func=cmd_enqueue)


def _headers(pairs: list[tuple[str, str]] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    headers: dict[str, str] = {}
    for name, value in pairs:
        if name in headers:
            raise CLIError(f"--header {name!r} is given twice: give each header once")
        headers[name] = value
    return headers


def _payload(args: argparse.Namespace) -> object:
    """The payload ``-l`` gives: JSON text parsed, or its bytes with ``--bytes``."""
    import orjson

    if args.payload is None:
        if args.bytes:
            raise CLIError("--bytes needs a payload (-l)")
        return None
    if args.bytes:
        return args.payload.encode()
    try:
        return orjson.loads(args.payload)
    except orjson.JSONDecodeError:
        raise CLIError("the payload is not valid JSON; quote strings (e.g. -l '\"text\"') or "
                       "pass --bytes to send it as raw bytes") from None


def cmd_enqueue(args: argparse.Namespace) -> int:
    """Enqueue one task with the options given, and say its id and state."""
    import asyncio

    from .._client._client import Client  # (redis-py and the broker: only when enqueueing)

    payload = _payload(args)
    if args.unique_key is not None and args.unique is None:
        raise CLIError("--unique-key needs --unique TTL (how long a duplicate is refused)")
    options: dict[str, Any] = {
        "queue": args.queue, "max_retry": args.max_retry, "timeout": args.timeout,
        "deadline": args.deadline, "process_at": args.process_at,
        "process_in": args.process_in, "expires_in": args.expires_in,
        "expires_at": args.expires_at, "unique": args.unique, "unique_key": args.unique_key,
        "task_id": args.task_id, "retention": args.retention, "group": args.group,
        "headers": _headers(args.header), "after": args.after,
    }
    options = {k: v for k, v in options.items() if v is not None}

    async def main() -> int:
        await check_redis(args.redis_url)
        async with Client(args.redis_url) as client:
            info = await client.enqueue(args.type, payload, **options)
        if args.json:
            print_json(task_doc(info))
        else:
            say(f"enqueued task {info.id} to queue {info.queue} (state {info.state.value})")
        return 0

    try:
        return asyncio.run(main())
    except TypeError as exc:
        raise CLIError(str(exc)) from None

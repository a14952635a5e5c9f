"""``asyncq stats``: every queue at a glance, today's totals and the Redis server."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ._output import (
    add_common_args,
    fmt_bytes,
    fmt_duration,
    print_json,
    print_table,
    queue_doc,
    run_inspector,
    say,
)

if TYPE_CHECKING:
    from .._inspector._inspector import Inspector

STATES = ("active", "pending", "aggregating", "scheduled", "retry", "archived", "completed")
_REDIS_FIELDS = ("redis_version", "uptime_in_seconds", "connected_clients", "used_memory",
                 "used_memory_human", "used_memory_peak_human")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "stats", help="queues at a glance, today's totals and the Redis server")
    add_common_args(p)
    p.set_defaults(func=cmd_stats)


async def _redis_info(inspector: Inspector) -> dict[str, Any]:
    info = await inspector.redis_info()
    return {k: info[k] for k in _REDIS_FIELDS if k in info}


def cmd_stats(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        infos = [await inspector.queue_info(q) for q in await inspector.queues()]
        totals = {s: sum(getattr(i, s) for i in infos) for s in STATES}
        processed = sum(i.processed for i in infos)
        failed = sum(i.failed for i in infos)
        today = datetime.now(UTC).date().isoformat()
        rate = failed / processed if processed else 0.0
        redis_info = await _redis_info(inspector)
        if args.json:
            print_json({"states": totals, "queues": [queue_doc(i) for i in infos],
                        "today": {"date": today, "processed": processed, "failed": failed,
                                  "error_rate": rate},
                        "redis": redis_info})
            return 0
        say("Tasks by state")
        print_table([s.upper() for s in STATES], [[totals[s] for s in STATES]])
        say()
        say("Queues")
        if infos:
            print_table(
                ["QUEUE", "STATE", "SIZE", "PENDING", "ACTIVE", "SCHEDULED", "RETRY",
                 "ARCHIVED", "COMPLETED", "AGGREGATING", "LATENCY", "MEMORY"],
                [[i.queue, "paused" if i.paused else "run", i.size, i.pending, i.active,
                  i.scheduled, i.retry, i.archived, i.completed, i.aggregating,
                  fmt_duration(i.latency), fmt_bytes(i.memory_usage)] for i in infos])
        else:
            say("no queues")
        say()
        say(f"Today ({today} UTC)")
        print_table(["PROCESSED", "FAILED", "ERROR RATE"],
                    [[processed, failed, f"{100 * rate:.2f}%" if processed else "-"]])
        say()
        say("Redis")
        print_table(["VERSION", "UPTIME", "CLIENTS", "MEMORY", "PEAK MEMORY"], [[
            redis_info.get("redis_version", "-"),
            fmt_duration(float(redis_info.get("uptime_in_seconds", 0))),
            redis_info.get("connected_clients", "-"),
            redis_info.get("used_memory_human", "-"),
            redis_info.get("used_memory_peak_human", "-"),
        ]])
        return 0

    return run_inspector(args, body)

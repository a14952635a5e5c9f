"""``asyncq scheduler module:attr``: run a scheduler process (a Scheduler, or asynq's
PeriodicTaskManager)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._common import (
    CLIError,
    add_log_args,
    add_redis_args,
    check_redis,
    import_object,
)

if TYPE_CHECKING:
    from .._scheduler import PeriodicTaskManager, Scheduler

DESCRIPTION = """\
Run a scheduler until SIGTERM/SIGINT (exit code 0): it enqueues the task of each of its
entries on the entry's schedule. `asyncq scheduler ls` lists the entries of the running
schedulers, `asyncq scheduler history ENTRY_ID` the tasks one entry enqueued.

TARGET is module:attr naming either
  * a factory, called as attr(redis_url) with the URL of --redis-url (or $ASYNCQ_REDIS_URL),
    that returns a Scheduler or PeriodicTaskManager:
        def make(redis_url: str) -> asyncq.Scheduler:
            s = asyncq.Scheduler(redis_url, timezone="Europe/Berlin")
            s.register("0 3 * * *", "report:nightly")
            return s
  * or a ready Scheduler / PeriodicTaskManager object, run as it is, on the Redis connection
    it was built with (--redis-url is then not used).

Run as many scheduler processes with the same entries as you like (for availability):
each firing is enqueued exactly once. Missed ticks are not replayed."""


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "scheduler", help="run a scheduler: enqueue tasks on schedules", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET",
                   help="module:attr of a factory(redis_url), a Scheduler or a "
                        "PeriodicTaskManager")
    add_redis_args(p)
    add_log_args(p)
    p.set_defaults(func=run)


def load_runner(target: str, redis_url: str) -> tuple[Scheduler | PeriodicTaskManager, bool]:
    """The object TARGET names and whether it was built from ``redis_url`` (by a factory)."""
    from .._scheduler import PeriodicTaskManager, Scheduler

    obj = import_object(target)
    if isinstance(obj, Scheduler | PeriodicTaskManager):
        return obj, False
    if not callable(obj) or isinstance(obj, type):
        raise CLIError(f"{target} is neither a Scheduler, a PeriodicTaskManager nor a factory "
                       f"function returning one")
    try:
        made = obj(redis_url)
    except (ValueError, TypeError) as exc:
        raise CLIError(f"{target}({redis_url!r}) failed: {exc}") from None
    if not isinstance(made, Scheduler | PeriodicTaskManager):
        raise CLIError(f"{target}(redis_url) returned {made!r}, not a Scheduler or a "
                       f"PeriodicTaskManager")
    return made, True


def run(args: argparse.Namespace) -> int:
    """Run the scheduler TARGET names until SIGTERM/SIGINT."""
    import asyncio

    from .._errors import AsyncqError
    from .._log_setup import configure_logging

    configure_logging(args.log_level, args.log_format)
    runner, from_url = load_runner(args.target, args.redis_url)

    async def main() -> None:
        if from_url:
            await check_redis(args.redis_url)
        else:
            try:
                await runner.broker.ping()
            except AsyncqError as exc:
                raise CLIError(f"cannot reach Redis: {exc}") from None
        await runner.run()

    asyncio.run(main())
    return 0

"""Handlers for the worker life-cycle tests (``tests/worker/test_lifecycle_*.py``): loop stalls
with Redis calls in flight."""

from __future__ import annotations

import asyncio
import os
import time

from redis.asyncio import Redis

from asyncq import ServeMux, Task

mux = ServeMux()


@mux.handler("lifecycle:block")
async def block(task: Task) -> None:
    """Blocks the event loop for ``payload["s"]`` seconds (the mistake being diagnosed)."""
    time.sleep(float(task.json()["s"]))  # noqa: ASYNC251 (on purpose)


@mux.handler("lifecycle:block_in_flight")
async def block_in_flight(task: Task) -> None:
    """Holds every client of Redis for ``payload["pause"]`` seconds (``CLIENT PAUSE``: Redis is
    healthy, it answers once the pause ends, well within the socket timeout), lets the worker
    send its periodic calls meanwhile, then blocks the event loop for ``payload["s"]`` seconds:
    the worker's calls in flight are answered while its loop is blocked."""
    args = task.json()
    redis = Redis.from_url(os.environ["LIFECYCLE_REDIS_URL"])
    try:
        await redis.execute_command("CLIENT", "PAUSE", int(args["pause"] * 1000), "ALL")
    finally:
        await redis.aclose()
    await asyncio.sleep(args["pause"] * 0.9)
    time.sleep(float(args["s"]))  # noqa: ASYNC251 (on purpose)

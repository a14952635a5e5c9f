"""The asyncq side of workflow_chord.py: ``python -m asyncq worker
benchmarks._wf_chord_asyncq:mux`` runs it; the callback stamps when it starts."""

from __future__ import annotations

import os
import time

import redis.asyncio

from asyncq import ServeMux, Task

STAMP = "bench:wfchord:callback_started"
mux = ServeMux()


@mux.handler("noop")
async def noop(task: Task) -> None:
    return None


@mux.handler("callback")
async def callback(task: Task) -> int:
    started = time.time()
    client = redis.asyncio.Redis.from_url(os.environ["ASYNCQ_REDIS_URL"])
    try:
        await client.set(STAMP, repr(started))
    finally:
        await client.aclose()
    return len(task.json())

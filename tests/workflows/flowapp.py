"""Handlers the workflow tests run (in-process workers and worker processes alike): typed
tasks for arithmetic, raw ones that record every run in a Redis ledger list."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import redis.asyncio

from asyncq import ServeMux, SkipRetry, Task

mux = ServeMux()
LEDGER = "test:wf:ledger"  # a list: one entry per handler run (task id)
FLAGS = "test:wf:flags"  # a hash: behaviour switches the tests flip


_clients: dict[int, redis.asyncio.Redis] = {}


def _redis() -> redis.asyncio.Redis:
    """One client per event loop (tests run several loops in one process)."""
    loop = id(asyncio.get_running_loop())
    url = os.environ.get("WF_REDIS_URL", "redis://127.0.0.1:1")
    client = _clients.get(loop)
    if client is None or client.connection_pool.connection_kwargs.get("port") != int(
            url.rsplit(":", 1)[1].split("/")[0]):
        client = _clients[loop] = redis.asyncio.Redis.from_url(url)
    return client


async def record(task: Task) -> None:
    await _redis().rpush(LEDGER, task.id or "")


@mux.task("wf:add")
async def add(x: int, y: int) -> int:
    return x + y


@mux.task("wf:mul")
async def mul(x: int, factor: int) -> int:
    return x * factor


@mux.task("wf:total")
async def total(values: list[int]) -> int:
    return sum(values)


@mux.task("wf:echo")
async def echo(value: Any) -> Any:
    return value


@mux.handler("wf:noop")
async def noop(task: Task) -> None:
    return None


@mux.handler("wf:ledger")
async def ledger(task: Task) -> Any:
    await record(task)
    return task.json()


@mux.handler("wf:count")
async def count(task: Task) -> int:
    """Records its run, returns the length of the list it was given."""
    await record(task)
    value = task.json()
    return len(value) if isinstance(value, list) else -1


@mux.handler("wf:maybe_fail")
async def maybe_fail(task: Task) -> str:
    """Fails for good while the flag 'fail' is set; records every run."""
    await record(task)
    failing = await _redis().hget(FLAGS, "fail")
    if failing:
        raise SkipRetry("told to fail")
    return "fixed"


@mux.handler("wf:block")
async def block(task: Task) -> None:
    await record(task)
    await asyncio.Event().wait()


@mux.handler("wf:sleep")
async def sleep(task: Task) -> int:
    await record(task)
    await asyncio.sleep(float(task.json() or 0))
    return 1


@mux.handler("wf:flaky")
async def flaky(task: Task) -> None:
    """Always fails (retried while retries are left); records every run."""
    await record(task)
    raise ValueError(f"attempt {task.retried} broke")

"""Helpers for tests: wait for a condition with a deadline, run a worker in-process."""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from redis.asyncio import Redis, RedisCluster

from .._broker import _keys as K
from .._broker import connect
from .._worker import Handler, Worker

POLL_INTERVAL = 0.005


async def wait_until(predicate: Callable[[], Any | Awaitable[Any]], *, timeout: float = 10.0,
                     message: str = "condition", interval: float = POLL_INTERVAL) -> Any:
    """Poll ``predicate`` (sync or async) every ``interval`` seconds until it returns a truthy
    value; return that value.

    Raises TimeoutError naming ``message`` if it is still falsy after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{message} not met within {timeout}s")
        await anyio.sleep(interval)


async def queue_counts(redis: Redis | RedisCluster, queue: str) -> dict[str, int]:
    """Sizes of a queue's pending, active, scheduled, retry, archived and completed sets."""
    qk = K.queue_keys(queue)
    pipe = redis.pipeline(transaction=False)
    pipe.llen(qk.pending)
    pipe.llen(qk.active)
    pipe.zcard(qk.scheduled)
    pipe.zcard(qk.retry)
    pipe.zcard(qk.archived)
    pipe.zcard(qk.completed)
    values = await pipe.execute()
    names = ("pending", "active", "scheduled", "retry", "archived", "completed")
    return dict(zip(names, (int(v) for v in values), strict=True))


async def wait_drained(redis: Redis | RedisCluster, queues: Iterable[str], *,
                       worker: Worker | None = None, timeout: float = 10.0,
                       include_scheduled: bool = False) -> None:
    """Wait until the queues have no pending and no active task (and, with
    ``include_scheduled``, no scheduled or retry task), and ``worker`` has written every outcome.
    """
    names = list(queues)
    last: dict[str, dict[str, int]] = {}

    async def drained() -> bool:
        for queue in names:
            counts = await queue_counts(redis, queue)
            last[queue] = counts
            busy = counts["pending"] + counts["active"]
            if include_scheduled:
                busy += counts["scheduled"] + counts["retry"]
            if busy:
                return False
        return worker is None or not (worker.processor.running or worker.acker.pending)

    try:
        await wait_until(drained, timeout=timeout, message="queues drained")
    except TimeoutError:
        raise TimeoutError(f"queues not drained within {timeout}s: {last}") from None


class RunningWorker:
    """A worker running in the test's event loop, with helpers to wait on it."""

    def __init__(self, worker: Worker, redis: Redis | RedisCluster) -> None:
        self.worker = worker
        self._redis = redis

    async def wait_drained(self, *queues: str, timeout: float = 10.0,
                           include_scheduled: bool = False) -> None:
        """Wait until ``queues`` (default: all the worker serves, those its patterns matched
        included) are drained."""
        await wait_drained(self._redis, queues or list(self.worker.served.names),
                           worker=self.worker, timeout=timeout,
                           include_scheduled=include_scheduled)


class WorkerFactory:
    """``async with factory(handler, **config) as w:`` runs a Worker until the block ends;
    ``factory.build(handler, **config)`` makes one that is not running, for a test to drive."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self._built: list[Worker] = []

    def build(self, handler: Handler, **config: Any) -> Worker:
        """A Worker on the factory's Redis that is not started: the test drives it (its
        components' rounds, ``run()``); its connections are closed when the test ends."""
        worker = Worker(self.redis_url, handler, **config)
        self._built.append(worker)
        return worker

    async def aclose(self) -> None:
        """Close the connections of the workers ``build`` made."""
        built, self._built = self._built, []
        for worker in built:
            await worker.broker.close()

    @asynccontextmanager
    async def __call__(self, handler: Handler, **config: Any) -> AsyncIterator[RunningWorker]:
        redis, close = connect(self.redis_url)
        try:
            async with Worker(self.redis_url, handler, **config) as worker:
                yield RunningWorker(worker, redis)
        finally:
            await close()

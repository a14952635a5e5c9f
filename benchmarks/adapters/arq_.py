"""arq: ``ArqRedis.enqueue_job`` (no bulk API), ``arq.Worker(max_jobs=100)``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from typing import Any

from arq import Worker, create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.constants import default_queue_name

from benchmarks import _probe
from benchmarks.adapters import SLEEP_S, run_loop


async def noop(ctx: dict[str, Any], i: int) -> None:
    _probe.done(i)


async def sleep(ctx: dict[str, Any], i: int) -> None:
    _probe.begin()
    await asyncio.sleep(SLEEP_S)
    _probe.done(i)


async def lat(ctx: dict[str, Any], i: int) -> int:
    _probe.started(i)
    _probe.done(i)
    return i


class Adapter:
    NAME = "arq"
    HAS_BULK = False
    BULK_API = None
    # arq polls its queue while idle (poll_delay, 0.5 s by default): the latency scenario adds a
    # random gap of up to this long before each enqueue so it samples arq's poll phase evenly.
    IDLE_POLL_S = float(inspect.signature(Worker).parameters["poll_delay"].default)
    NOTES = ("max_jobs=100, other defaults: the worker polls its queue every poll_delay=0.5 s "
             "when idle; results kept 1 h (keep_result=3600); pickle")

    HAS_APPLY = True
    APPLY_API = "job.result() (polls every 0.5 s, its default)"

    def __init__(self) -> None:
        self.pool: ArqRedis | None = None

    async def apply(self, kind: str, i: int) -> Any:
        assert self.pool is not None
        job = await self.pool.enqueue_job(kind, i)
        assert job is not None
        return await job.result(timeout=30)

    async def open(self, url: str) -> None:
        self.pool = await create_pool(RedisSettings.from_dsn(url))

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()

    async def enqueue(self, kind: str, i: int) -> None:
        assert self.pool is not None
        job = await self.pool.enqueue_job(kind, i)
        if job is None:
            raise RuntimeError(f"arq refused job {kind}({i}) as a duplicate")

    async def enqueue_bulk(self, kind: str, indices: Sequence[int]) -> None:
        raise NotImplementedError

    async def stored(self, redis: Any) -> int:
        return int(await redis.zcard(default_queue_name))

    @staticmethod
    def run_worker(url: str, concurrency: int, loop: str) -> None:
        async def main() -> None:
            worker = Worker(functions=[noop, sleep, lat],  # type: ignore[list-item]
                            redis_settings=RedisSettings.from_dsn(url), max_jobs=concurrency)
            try:
                await worker.async_run()
            except asyncio.CancelledError:
                pass  # arq's SIGTERM handler cancels its main task
            finally:
                await worker.close()

        run_loop(main(), loop)

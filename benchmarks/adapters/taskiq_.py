"""taskiq + taskiq-redis: ``task.kiq()`` (no bulk API), ``RedisStreamBroker`` (the broker
taskiq-redis recommends: it acknowledges, so a killed worker loses nothing), worker run as
``taskiq worker`` runs it, with ``--max-async-tasks 100``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from taskiq_redis import RedisStreamBroker

from benchmarks import _probe
from benchmarks.adapters import SLEEP_S

QUEUE = "taskiq"
broker = RedisStreamBroker(url=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379"),
                           queue_name=QUEUE)


@broker.task(task_name="noop")
async def noop(i: int) -> None:
    _probe.done(i)


@broker.task(task_name="sleep")
async def sleep(i: int) -> None:
    _probe.begin()
    await asyncio.sleep(SLEEP_S)
    _probe.done(i)


@broker.task(task_name="lat")
async def lat(i: int) -> None:
    _probe.started(i)
    _probe.done(i)


_TASKS = {"noop": noop, "sleep": sleep, "lat": lat}


class Adapter:
    NAME = "taskiq"
    HAS_BULK = False
    BULK_API = None
    NOTES = ("taskiq-redis RedisStreamBroker (recommended: acknowledges); worker run through "
             "taskiq's own CLI entry (start_listen) with --max-async-tasks 100 --workers 1; "
             "no result backend (taskiq's default); JSON")

    async def open(self, url: str) -> None:
        await broker.startup()

    async def close(self) -> None:
        await broker.shutdown()

    async def enqueue(self, kind: str, i: int) -> None:
        await _TASKS[kind].kiq(i)

    async def enqueue_bulk(self, kind: str, indices: Sequence[int]) -> None:
        raise NotImplementedError

    async def stored(self, redis: Any) -> int:
        return int(await redis.xlen(QUEUE))

    @staticmethod
    def run_worker(url: str, concurrency: int, loop: str) -> None:
        from taskiq.cli.worker import run as taskiq_run
        from taskiq.cli.worker.args import WorkerArgs

        if loop != "uvloop":
            # `taskiq worker` picks uvloop whenever it is importable; the harness installs
            # uvloop in every venv, so honour the loop chosen for all libraries.
            taskiq_run.uvloop = None  # type: ignore[assignment]
        args = WorkerArgs.from_cli([f"{__name__}:broker", "--max-async-tasks", str(concurrency),
                                    "--workers", "1"])
        taskiq_run.start_listen(args)

"""Idle pickup latency on ``?wire=asynq`` (Go asynq's layout): how soon an idle asyncq worker
starts a task, by who enqueued it.

    .venv/bin/python -m benchmarks.asynq_wire_pickup [--samples 200] [--go-samples 40] [--no-save]

On a fresh loopback ``redis-server``, one in-process worker (concurrency 1) on one queue; the
producer waits until the worker is idle (its last dequeue found nothing), then enqueues one
task and measures the time until the handler starts (same process, ``time.perf_counter``):

* ``asyncq client``: enqueued by asyncq's Client: the enqueue script leases the task to the
  idle worker and publishes it on the worker's channel (one hop), so no poll is involved;
* ``go client, idle_poll_interval=X``: written the way Go's ``Client.Enqueue`` writes it (the
  protobuf message, state, pending_since, LPUSH; one MULTI), which wakes nobody: the worker
  takes it at its next poll. A random gap of up to one poll period before each enqueue samples
  the poll's phase uniformly (an enqueue right after each start would always wait a full
  period). Expected: uniform over [0, X] plus one dequeue, so p50 ≈ X/2, max ≈ X;
* ``asyncq layout``: asyncq's own layout (no ``?wire``), one hop, for reference.

Prints a table (p50/p90/p99/max, ms) and saves
``benchmarks/results/asynq_wire_pickup-<UTC time>.json``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, Worker, configure_logging
from asyncq._broker import _keys as own_keys
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq._defaults import WORKER_IDLE_POLL_INTERVAL
from asyncq._testing.redis_server import RedisServer
from benchmarks._results import save_result


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Starts:
    """When each task's handler started (perf_counter), and a way to wait for one."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self._waiting: dict[str, asyncio.Future[float]] = {}

    def mux(self) -> ServeMux:
        mux = ServeMux()

        @mux.handler("t")
        async def handle(task: Task) -> None:
            now = time.perf_counter()
            fut = self._waiting.pop(task.id, None)
            if fut is not None and not fut.done():
                fut.set_result(now)
            self.at[task.id] = now

        return mux

    def expect(self, task_id: str) -> asyncio.Future[float]:
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiting[task_id] = fut
        return fut


async def go_enqueue(redis: Redis, queue: str, task_id: str) -> None:
    """What Go's Client.Enqueue writes (rdb.go Enqueue), in one transaction."""
    qk = K.queue_keys(queue)
    msg = _codec.encode(_codec.AsynqTask(type="t", payload=b"{}", id=task_id, queue=queue,
                                         timeout=1800))
    pipe = redis.pipeline(transaction=True)
    pipe.sadd(K.QUEUES, queue)
    pipe.hset(qk.task(task_id), mapping={"msg": msg, "state": "pending",
                                         "pending_since": time.time_ns()})
    pipe.lpush(qk.pending, task_id)
    await pipe.execute()


async def wait_idle(redis: Redis, idle_key: str) -> None:
    """Until the worker registered as idle (its last dequeue found nothing)."""
    deadline = time.monotonic() + 30
    while not await redis.zcard(idle_key):
        if time.monotonic() > deadline:
            raise TimeoutError("the worker never became idle")
        await asyncio.sleep(0.001)


async def sample(redis: Redis, idle_key: str, starts: Starts, samples: int, gap: float,
                 enqueue: Callable[[str], Awaitable[None]]) -> list[float]:
    out = []
    for _ in range(samples):
        await wait_idle(redis, idle_key)
        if gap:
            await asyncio.sleep(random.uniform(0, gap))
        task_id = str(uuid.uuid4())
        started = starts.expect(task_id)
        t0 = time.perf_counter()
        await enqueue(task_id)
        out.append((await asyncio.wait_for(started, 30) - t0) * 1000)
    return out


async def variant(url: str, redis: Redis, *, wire: str, producer: str, samples: int,
                  poll: float) -> dict[str, Any]:
    queue = f"pickup-{uuid.uuid4().hex[:8]}"
    starts = Starts()
    worker_url = url + ("?wire=asynq" if wire == "asynq" else "")
    idle_key = (K.extra_keys(queue).idle if wire == "asynq" else
                own_keys.queue_keys(queue).idle)
    async with Worker(worker_url, starts.mux(), queues={queue: 1}, concurrency=1,
                      idle_poll_interval=poll), Client(worker_url) as client:
        async def by_client(task_id: str) -> None:
            await client.enqueue("t", {}, queue=queue, task_id=task_id)

        async def by_go(task_id: str) -> None:
            await go_enqueue(redis, queue, task_id)

        enqueue = by_go if producer == "go" else by_client
        gap = poll if producer == "go" else 0.0
        await sample(redis, idle_key, starts, 5, gap, enqueue)  # warm-up
        ms = await sample(redis, idle_key, starts, samples, gap, enqueue)
    return {"wire": wire, "producer": producer, "idle_poll_interval_s": poll,
            "samples": samples, "p50_ms": percentile(ms, 50), "p90_ms": percentile(ms, 90),
            "p99_ms": percentile(ms, 99), "max_ms": max(ms), "mean_ms": statistics.fmean(ms),
            "latency_ms": ms}


async def run(samples: int, go_samples: int, polls: list[float]) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    with RedisServer() as server:
        redis = Redis.from_url(server.url)
        default = WORKER_IDLE_POLL_INTERVAL
        rows["asyncq client (one hop)"] = await variant(
            server.url, redis, wire="asynq", producer="asyncq", samples=samples, poll=default)
        for poll in polls:
            rows[f"go client, idle_poll_interval={poll:g}"] = await variant(
                server.url, redis, wire="asynq", producer="go", samples=go_samples, poll=poll)
        rows["asyncq layout (reference)"] = await variant(
            server.url, redis, wire="asyncq", producer="asyncq", samples=samples,
            poll=default)
        await redis.aclose()
    return {"variants": rows, "default_idle_poll_interval_s": WORKER_IDLE_POLL_INTERVAL,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "platform": platform.platform(),
                        "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None}}


def table(doc: dict[str, Any]) -> str:
    lines = ["| producer → idle asyncq worker | samples | p50 ms | p90 ms | p99 ms | max ms |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, row in doc["variants"].items():
        lines.append(f"| {name} | {row['samples']} | {row['p50_ms']:.2f} | "
                     f"{row['p90_ms']:.2f} | {row['p99_ms']:.2f} | {row['max_ms']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--samples", type=int, default=200, help="per asyncq-client variant")
    p.add_argument("--go-samples", type=int, default=40, help="per Go-client variant")
    p.add_argument("--polls", default=f"{WORKER_IDLE_POLL_INTERVAL:g},0.5,0.1",
                   help="idle_poll_interval values for the Go-client variants")
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    configure_logging("error")
    polls = [float(x) for x in args.polls.split(",")]
    doc = asyncio.run(run(args.samples, args.go_samples, polls))
    print(table(doc))
    if not args.no_save:
        save_result("asynq_wire_pickup", doc)


if __name__ == "__main__":
    main()

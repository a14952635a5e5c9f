"""Idle pickup latency on ``?wire=asynq`` (Go asynq's layout): how soon an idle worker starts a
task, by who enqueued it and who serves it; and what an idle worker costs Redis at rest.

    .venv/bin/python -m benchmarks.asynq_wire_pickup [--samples 200] [--go-samples 100]
        [--idle-seconds 20] [--no-save]

On a fresh loopback ``redis-server``, one in-process asyncq worker (concurrency 1) on one queue;
the producer waits until the worker is idle (its last dequeue found nothing), waits a random gap
of up to one ``idle_poll_interval`` (so a worker that polls is met at every phase of its poll),
then enqueues one task and measures the time until the handler starts:

* ``asyncq client``: asyncq's Client: the enqueue script leases the task to the idle worker and
  publishes it on the worker's channel (one hop). Same process, ``time.perf_counter``;
* ``go client (asynq.Client)``: Go's own client, unmodified (``benchmarks/go``'s ``enqueue``
  command, one long-running process fed task ids on stdin), which only LPUSHes the id: the
  idle worker's blocked wait on the pending list ends, and it dequeues the task. From the Go
  side's wall clock just before ``Client.Enqueue`` to the handler's ``time.time()``;
* ``go client -> Go server``: Go's asynq Server serving Go's client, for comparison: the Go
  peer's ``latency`` scenario of ``make bench`` (``asynqbench driver --scenario latency``, same
  method: a random gap of up to one poll, wall clocks; asynq's server polls every 0.5-1.5 s);
* ``asyncq layout``: asyncq's own layout (no ``?wire``), one hop, for reference.

The Go rows need Go (``benchmarks/_go.py`` builds ``benchmarks/go``); without it they are left
out, saying so. Then ``idle redis``: a worker idle on 1 and on 8 queues for ``--idle-seconds``,
redis-server's own CPU (``INFO cpu``) and commands per second at rest (the waits send one
BLMOVE per queue every ``PENDING_BLOCK_S``).

Prints two tables and saves ``benchmarks/results/asynq_wire_pickup-<UTC time>.json`` (machine,
date and commit included). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, Worker, configure_logging
from asyncq._broker import _keys as own_keys
from asyncq._broker._asynq import _keys as K
from asyncq._defaults import WORKER_IDLE_POLL_INTERVAL
from asyncq._testing.redis_server import RedisServer
from benchmarks import _go
from benchmarks._results import save_result
from benchmarks._venvs import ROOT


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(ms: list[float], **extra: Any) -> dict[str, Any]:
    return {**extra, "samples": len(ms), "p50_ms": percentile(ms, 50),
            "p90_ms": percentile(ms, 90), "p99_ms": percentile(ms, 99), "max_ms": max(ms),
            "mean_ms": statistics.fmean(ms), "latency_ms": ms}


class Starts:
    """When each task's handler started (``perf_counter`` and wall clock), and a way to wait
    for one."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[tuple[float, float]]] = {}

    def mux(self) -> ServeMux:
        mux = ServeMux()

        @mux.handler("t")
        async def handle(task: Task) -> None:
            now = (time.perf_counter(), time.time())
            fut = self._waiting.pop(task.id, None)
            if fut is not None and not fut.done():
                fut.set_result(now)

        return mux

    def expect(self, task_id: str) -> asyncio.Future[tuple[float, float]]:
        fut: asyncio.Future[tuple[float, float]] = asyncio.get_running_loop().create_future()
        self._waiting[task_id] = fut
        return fut


class GoClient:
    """Go's asynq.Client in a process of its own (``asynqbench enqueue``)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    @classmethod
    async def start(cls, binary: str, url: str) -> GoClient:
        proc = await asyncio.create_subprocess_exec(
            binary, "enqueue", "--url", url, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE)
        return cls(proc)

    async def enqueue(self, queue: str, task_id: str) -> float:
        """Enqueue one task; the wall time just before Go's Client.Enqueue ran."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(f"{queue} {task_id}\n".encode())
        await self._proc.stdin.drain()
        line = (await asyncio.wait_for(self._proc.stdout.readline(), 30)).decode().split()
        if len(line) != 2 or line[0] != task_id:
            raise RuntimeError(f"asynqbench enqueue answered {line!r}")
        return float(line[1])

    async def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        await asyncio.wait_for(self._proc.wait(), 30)


async def wait_idle(redis: Redis, idle_key: str) -> None:
    """Until the worker registered as idle (its last dequeue found nothing)."""
    deadline = time.monotonic() + 30
    while not await redis.zcard(idle_key):
        if time.monotonic() > deadline:
            raise TimeoutError("the worker never became idle")
        await asyncio.sleep(0.001)


async def sample(redis: Redis, idle_key: str, starts: Starts, samples: int, gap: float,
                 enqueue: Callable[[str], Awaitable[float | None]]) -> list[float]:
    """``samples`` pickups (ms): ``enqueue`` returns the wall time it started at (None: the
    perf_counter just before it was called counts)."""
    out = []
    for _ in range(samples):
        await wait_idle(redis, idle_key)
        if gap:
            await asyncio.sleep(random.uniform(0, gap))
        task_id = str(uuid.uuid4())
        started = starts.expect(task_id)
        t0 = time.perf_counter()
        wall0 = await enqueue(task_id)
        at, wall = await asyncio.wait_for(started, 30)
        out.append((at - t0 if wall0 is None else wall - wall0) * 1000)
    return out


async def variant(url: str, redis: Redis, *, wire: str, samples: int, poll: float,
                  go_binary: str | None = None) -> dict[str, Any]:
    """An idle asyncq worker; tasks from asyncq's Client, or Go's with ``go_binary``."""
    queue = f"pickup-{uuid.uuid4().hex[:8]}"
    starts = Starts()
    worker_url = url + ("?wire=asynq" if wire == "asynq" else "")
    idle_key = (K.extra_keys(queue).idle if wire == "asynq" else
                own_keys.queue_keys(queue).idle)
    go = await GoClient.start(go_binary, url) if go_binary else None
    try:
        async with Worker(worker_url, starts.mux(), queues={queue: 1}, concurrency=1,
                          idle_poll_interval=poll), Client(worker_url) as client:
            async def by_client(task_id: str) -> float | None:
                await client.enqueue("t", {}, queue=queue, task_id=task_id)
                return None

            async def by_go(task_id: str) -> float | None:
                assert go is not None
                return await go.enqueue(queue, task_id)

            enqueue = by_client if go is None else by_go
            await sample(redis, idle_key, starts, 5, 0.0, enqueue)  # warm-up
            ms = await sample(redis, idle_key, starts, samples, poll, enqueue)
    finally:
        if go is not None:
            await go.close()
    return summary(ms, wire=wire, producer="go" if go_binary else "asyncq",
                   idle_poll_interval_s=poll)


def go_server(binary: str, url: str, samples: int, budget: float) -> dict[str, Any]:
    """Go's client and Go's server: the Go peer's ``latency`` scenario."""
    with tempfile.TemporaryDirectory() as logs:
        proc = subprocess.run([binary, "driver", "--scenario", "latency", "--url", url,
                               "--n", str(samples), "--budget", str(budget), "--concurrency",
                               "1", "--log-dir", logs], capture_output=True, text=True,
                              timeout=budget + 120, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"asynqbench driver failed: {proc.stdout[-800:]}{proc.stderr[-800:]}")
    doc = json.loads(line.removeprefix("RESULT "))
    if doc.get("status") != "ok" or not doc.get("latency_ms"):
        raise RuntimeError(f"asynqbench driver: {doc.get('status')}: {doc.get('error')}")
    return summary(doc["latency_ms"], wire="asynq", producer="go", server="asynq (Go)",
                   task_check_interval_s=doc.get("task_check_interval_s"))


async def idle_cost(queues: int, seconds: float) -> dict[str, Any]:
    """redis-server's CPU and commands per second while one asyncq worker (``?wire=asynq``,
    default settings) sits idle on ``queues`` queues (on a Redis of its own)."""
    names = {f"idle-{i}-{uuid.uuid4().hex[:6]}": 1 for i in range(queues)}
    with RedisServer() as server:
        redis = Redis.from_url(server.url)
        async with Worker(server.url + "?wire=asynq", Starts().mux(), queues=names):
            for q in names:
                await wait_idle(redis, K.extra_keys(q).idle)
            await asyncio.sleep(1.0)
            before = await redis.info()
            t0 = time.monotonic()
            await asyncio.sleep(seconds)
            after = await redis.info()
            dt = time.monotonic() - t0
        await redis.aclose()

    def cpu(info: dict[str, Any]) -> float:
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    commands = after["total_commands_processed"] - before["total_commands_processed"] - 1
    return {"queues": queues, "seconds": dt,
            "redis_cpu_ms_per_s": (cpu(after) - cpu(before)) * 1000 / dt,
            "commands_per_s": commands / dt}


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


async def run(samples: int, go_samples: int, idle_seconds: float,
              go_binary: str | None, go_missing: str | None) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    poll = WORKER_IDLE_POLL_INTERVAL
    with RedisServer() as server:
        redis = Redis.from_url(server.url)
        rows["asyncq client -> asyncq worker"] = await variant(
            server.url, redis, wire="asynq", samples=samples, poll=poll)
        if go_binary is not None:
            rows["go client (asynq.Client) -> asyncq worker"] = await variant(
                server.url, redis, wire="asynq", samples=go_samples, poll=poll,
                go_binary=go_binary)
            rows["go client -> Go server (asynq)"] = await asyncio.to_thread(
                go_server, go_binary, server.url, go_samples, 90.0)
        rows["asyncq layout (reference)"] = await variant(
            server.url, redis, wire="asyncq", samples=samples, poll=poll)
        await redis.aclose()
    idle = [await idle_cost(n, idle_seconds) for n in (1, 8)]
    return {"variants": rows, "idle_redis": idle, "go_missing": go_missing,
            "default_idle_poll_interval_s": WORKER_IDLE_POLL_INTERVAL, "commit": commit(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "platform": platform.platform(),
                        "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None}}


def table(doc: dict[str, Any]) -> str:
    lines = ["| producer -> idle worker (wire=asynq) | samples | p50 ms | p90 ms | p99 ms "
             "| max ms |", "|---|---:|---:|---:|---:|---:|"]
    for name, row in doc["variants"].items():
        lines.append(f"| {name} | {row['samples']} | {row['p50_ms']:.2f} | "
                     f"{row['p90_ms']:.2f} | {row['p99_ms']:.2f} | {row['max_ms']:.2f} |")
    if doc["go_missing"]:
        lines.append(f"\n(Go rows left out: {doc['go_missing']})")
    lines += ["", "| idle asyncq worker, wire=asynq | redis CPU ms/s | commands/s |",
              "|---|---:|---:|"]
    for row in doc["idle_redis"]:
        lines.append(f"| {row['queues']} queue(s), {row['seconds']:.0f} s | "
                     f"{row['redis_cpu_ms_per_s']:.3f} | {row['commands_per_s']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--samples", type=int, default=200, help="per asyncq-client row")
    p.add_argument("--go-samples", type=int, default=100, help="per Go-client row")
    p.add_argument("--idle-seconds", type=float, default=20.0,
                   help="the window of each idle-Redis row")
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    configure_logging("error")
    env = _go.ensure(log_dir=Path(tempfile.gettempdir()), quiet=True)
    binary = str(_go.BINARY) if env.available else None
    doc = asyncio.run(run(args.samples, args.go_samples, args.idle_seconds, binary,
                          None if env.available else env.error))
    print(table(doc))
    if not args.no_save:
        save_result("asynq_wire_pickup", doc)


if __name__ == "__main__":
    main()

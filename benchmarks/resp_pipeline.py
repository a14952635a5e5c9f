"""What the hand-packed RESP pipeline (``asyncq._broker._resp``) saves per task, in isolation.

    .venv/bin/python -m benchmarks.resp_pipeline [--tasks 50000] [--rounds 7] [--no-save]

On a fresh loopback ``redis-server`` the same script calls go through the two single-node
pipelines asyncq can use, alternating, ``--rounds`` times:

* ``hand-packed``: ``_resp.pack`` + ``_resp.raw_pipeline`` (one buffer, one write);
* ``redis-py``: redis-py's own pipeline
  (``execute_command`` per call, ``execute(raise_on_error=False)``).

Workloads, as asyncq sends them: ``enqueue_many`` (``enqueue_batch`` calls of 250 tasks, 8 per
round trip, scripts preloaded: what ``Client.enqueue_many`` of 2 000 tasks sends) and the acker
(``done`` outcomes of leased tasks, 500 per round trip: the acker's batch). Also ``pack only``:
the CPU time of packing the acker's batch, without I/O. Reported: median wall and CPU time of
this process per task, and what hand-packing saves. Prints a table and saves
``benchmarks/results/resp-<UTC time>.json``. Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis
from redis.asyncio import Redis
from redis.asyncio.connection import Connection

from asyncq import Task
from asyncq._broker._calls import ScriptCall, batch_call, finish_call
from asyncq._broker._connection import make_broker
from asyncq._broker._protocol import Outcome
from asyncq._broker._resp import pack, raw_pipeline
from asyncq._broker._scripts import Script, load_scripts
from asyncq._clock import SYSTEM_CLOCK
from asyncq._model._enqueue import prepare
from asyncq._testing.redis_server import RedisServer
from benchmarks._results import save_result

ROOT = Path(__file__).resolve().parents[1]
ENQUEUE_RUN = 250  # tasks per enqueue_batch call (as RedisBroker.store_many)
ENQUEUE_CHUNK = 8  # enqueue_batch calls per round trip
ACK_BATCH = 500  # outcomes per round trip (the acker's batch)
OWNER = "bench-owner"

Resolved = list[tuple[Script, Any, Any]]
Pipeline = Callable[[Redis, Resolved, list[Script]], Awaitable[list[Any]]]


async def hand_packed(r: Redis, calls: Resolved, preload: list[Script]) -> list[Any]:
    commands = [pack(("SCRIPT", "LOAD", s.source)) for s in preload]
    commands += [pack(("EVALSHA", s.sha, len(keys), *keys, *args)) for s, keys, args in calls]
    return (await raw_pipeline(r, commands))[len(preload):]


async def redis_py(r: Redis, calls: Resolved, preload: list[Script]) -> list[Any]:
    """What asyncq would send without hand-packing: redis-py's own pipeline."""
    pipe = r.pipeline(transaction=False)
    for script in preload:
        pipe.script_load(script.source)
    for script, keys, args in calls:
        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    return list(await pipe.execute(raise_on_error=False))[len(preload):]


PIPELINES: dict[str, Pipeline] = {"hand-packed": hand_packed, "redis-py": redis_py}


def resolve(calls: list[ScriptCall]) -> Resolved:
    scripts = load_scripts()
    return [(scripts[c.name], c.keys, c.args) for c in calls]


def enqueue_calls(queue: str, n: int) -> list[Resolved]:
    """Round trips of enqueue_batch calls storing ``n`` new tasks, as store_many builds them."""
    now = SYSTEM_CLOCK.now_ms()
    tasks = [prepare(Task("noop", {"i": i}, queue=queue), {}, now) for i in range(n)]
    calls = [batch_call(tasks[i:i + ENQUEUE_RUN], now) for i in range(0, n, ENQUEUE_RUN)]
    return [resolve(calls[i:i + ENQUEUE_CHUNK]) for i in range(0, len(calls), ENQUEUE_CHUNK)]


async def time_round_trips(r: Redis, pipeline: Pipeline, trips: list[Resolved],
                           preload: bool) -> tuple[float, float]:
    scripts = list({s.name: s for s, _, _ in trips[0]}.values()) if preload else []
    wall, cpu = time.perf_counter(), time.process_time()
    for trip in trips:
        out = await pipeline(r, trip, scripts)
        assert not any(isinstance(x, Exception) for x in out), out[:1]
    return time.perf_counter() - wall, time.process_time() - cpu


async def enqueue_round(url: str, name: str, n: int) -> tuple[float, float]:
    async with Redis.from_url(url) as r:
        await r.flushall()
        trips = enqueue_calls(f"resp-{uuid.uuid4().hex[:6]}", n)
        return await time_round_trips(r, PIPELINES[name], trips, preload=True)


async def ack_round(url: str, name: str, n: int) -> tuple[float, float]:
    """Lease ``ACK_BATCH`` tasks at a time (not timed) and time writing their ``done``
    outcomes, as a worker running that many tasks at once would."""
    broker = make_broker(url)
    try:
        await broker.redis.flushall()
        await broker.load_scripts()
        queue = f"resp-{uuid.uuid4().hex[:6]}"
        for trip in enqueue_calls(queue, n):
            await hand_packed(broker.redis, trip, [])
        wall = cpu = 0.0
        for _ in range(n // ACK_BATCH):
            tasks, _ = await broker.dequeue(queue, ACK_BATCH, OWNER, 600_000, 1000)
            now = SYSTEM_CLOCK.now_ms()
            trip = resolve([finish_call(Outcome("done", queue, t.id), OWNER, now)
                            for t in tasks])
            w, c = await time_round_trips(broker.redis, PIPELINES[name], [trip], preload=False)
            wall, cpu = wall + w, cpu + c
        return wall, cpu
    finally:
        await broker.close()


def pack_round(name: str, n: int) -> tuple[float, float]:
    """CPU time of packing ``n`` acker calls, no I/O."""
    now = SYSTEM_CLOCK.now_ms()
    calls = resolve([finish_call(Outcome("done", "q", uuid.uuid4().hex), OWNER, now)
                     for _ in range(n)])
    commands = [("EVALSHA", s.sha, len(keys), *keys, *args) for s, keys, args in calls]
    conn = Connection()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, n, ACK_BATCH):
        part = commands[i:i + ACK_BATCH]
        if name == "hand-packed":
            b"".join(pack(c) for c in part)
        else:
            conn.pack_commands(part)
    return time.perf_counter() - wall, time.process_time() - cpu


async def measure(url: str, tasks: int, rounds: int) -> list[dict[str, Any]]:
    workloads: dict[str, Callable[[str], Awaitable[tuple[float, float]]]] = {
        "enqueue_many": lambda name: enqueue_round(url, name, tasks),
        "acker finish": lambda name: ack_round(url, name, tasks),
    }

    async def packing(name: str) -> tuple[float, float]:
        return pack_round(name, tasks)

    workloads["pack only (acker)"] = packing
    rows = []
    for workload, run in workloads.items():
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in PIPELINES}
        await run("redis-py")  # warm-up: scripts loaded, connections made, code paths hot
        for _ in range(rounds):
            for name in PIPELINES:  # alternate, so drift in the machine's load hits both
                samples[name].append(await run(name))
        row: dict[str, Any] = {"workload": workload, "tasks": tasks, "rounds": rounds}
        for name, values in samples.items():
            row[name] = {
                "wall_us_per_task": round(statistics.median(w for w, _ in values) / tasks * 1e6,
                                          3),
                "cpu_us_per_task": round(statistics.median(c for _, c in values) / tasks * 1e6,
                                         3),
            }
        for unit in ("wall_us_per_task", "cpu_us_per_task"):
            base, ours = row["redis-py"][unit], row["hand-packed"][unit]
            row[f"saved_{unit}"] = round(base - ours, 3)
            row[f"saved_{unit.split('_')[0]}_pct"] = round(100 * (base - ours) / base, 1)
        rows.append(row)
    return rows


def machine() -> dict[str, Any]:
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    return {"cores": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version(), "redis_py": redis.__version__,
            "redis_server": version, "load_avg": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    if args.tasks % 2000:
        parser.error("--tasks must be a multiple of 2000 (whole enqueue_many calls)")
    with RedisServer() as server:
        rows = asyncio.run(measure(server.url, args.tasks, args.rounds))
    print(f"{'workload':<20}{'redis-py us/task':>18}{'hand-packed':>14}{'saved':>9}"
          f"{'cpu redis-py':>14}{'cpu hand':>10}{'cpu saved':>11}")
    for row in rows:
        print(f"{row['workload']:<20}{row['redis-py']['wall_us_per_task']:>18.2f}"
              f"{row['hand-packed']['wall_us_per_task']:>14.2f}{row['saved_wall_pct']:>8.1f}%"
              f"{row['redis-py']['cpu_us_per_task']:>14.2f}"
              f"{row['hand-packed']['cpu_us_per_task']:>10.2f}{row['saved_cpu_pct']:>10.1f}%")
    if not args.no_save:
        save_result("resp", {"command": "python -m benchmarks.resp_pipeline",
                             "args": vars(args), "machine": machine(), "results": rows})


if __name__ == "__main__":
    main()

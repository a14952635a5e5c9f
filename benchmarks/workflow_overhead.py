"""What a task costs as a workflow step: N no-op tasks drained by one in-process worker,
enqueued plainly and then as the members of one workflow group, alternating.

    .venv/bin/python -m benchmarks.workflow_overhead [--tasks 20000] [--rounds 3]

Prints tasks/s, this process's CPU per task (client and worker) and Redis script time per
task (INFO commandstats) for each run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time

import redis.asyncio

from asyncq import Client, ServeMux, Task, Worker, group
from asyncq.testing import wait_drained
from benchmarks._redis import RedisServer


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def run(url: str, n: int, as_workflow: bool) -> dict[str, object]:
    mux = ServeMux()

    @mux.handler("noop")
    async def noop(task: Task) -> None:
        return None

    admin = redis.asyncio.Redis.from_url(url)
    await admin.flushall()
    await admin.config_resetstat()
    async with Client(url) as client, Worker(url, mux, concurrency=50) as worker:
        await asyncio.sleep(0.5)
        cpu, began = _cpu(), time.perf_counter()
        if as_workflow:
            flow = await client.enqueue_workflow(group(*(Task("noop", i) for i in range(n))))
            await client.result(flow.id, timeout=600)
        else:
            for start in range(0, n, 1000):
                await client.enqueue_many([Task("noop", i) for i in range(start, start + 1000)])
            await wait_drained(admin, ["default"], worker=worker, timeout=600)
        wall, cpu = time.perf_counter() - began, _cpu() - cpu
    stats = (await admin.info("commandstats")).get("cmdstat_evalsha", {})
    await admin.aclose()
    return {"workflow": as_workflow, "tasks_per_s": round(n / wall),
            "process_cpu_us_per_task": round(cpu / n * 1e6, 1),
            "redis_script_us_per_task": round(stats.get("usec", 0) / n, 1)}


async def main(url: str, n: int, rounds: int) -> None:
    for _ in range(rounds):
        for as_workflow in (False, True):
            print(json.dumps(await run(url, n, as_workflow)), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    with RedisServer() as server:
        asyncio.run(main(server.url, args.tasks, args.rounds))

"""What task expiry costs in the scripts that start a task, unused and used.

    .venv/bin/python -m benchmarks.expiry [--tasks 20000] [--rounds 5] [--no-save]

On a fresh loopback ``redis-server``, ``--tasks`` tasks are enqueued (one ``enqueue_many``),
then leased by ``dequeue.lua`` in calls of 100 (or moved by ``forward.lua``, 100 a call), once
per variant, variants alternating, for ``--rounds`` rounds. Measured: Redis time per task
(``cmdstat_evalsha`` µs over those calls, divided by the tasks), the median over the rounds.

* ``dequeue, no check``: tasks without an expiry, through a copy of the shipped ``dequeue.lua``
  whose expiry read is taken out — the script as it was before expiry existed;
* ``dequeue, no expiry``: the same tasks through the shipped script (the unused cost is the
  difference: one plain search of each message for ``"expires":``);
* ``dequeue, expiry ahead``: tasks with ``expires_in=3600``, leased (the used cost when the
  task is in time: the search finds it and reads the number);
* ``dequeue, expired``: the same, leased an hour later: each is archived unrun (state, reason,
  archive entry, counter; the archive caps checked) instead of leased;
* ``forward, no check`` / ``forward, no expiry``: due scheduled tasks moved to pending by
  ``forward.lua`` without and with its expiry read (it reads each task's message for it).

The machine may be shared, so each variant also reports its fastest round (the least disturbed),
and the check itself is timed alone: a script calling the expiry read ``--loops`` times on a
stored message, minus the same loop without the call (fastest of 7), in µs per call.

Also reported: the bytes an expiry adds to a stored message. Prints a table and saves
``benchmarks/results/expiry-<UTC time>.json``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from typing import Any

from redis.asyncio import Redis

from asyncq import Client, Task, configure_logging
from asyncq._broker import _keys as K
from asyncq._broker._calls import ARCHIVE_CAPS, EXPIRED_PER_DEQUEUE
from asyncq._broker._redis import HANDOFF_GRACE_MS
from asyncq._broker._scripts import load_scripts
from asyncq._model._enqueue import prepare
from asyncq._testing.redis_server import RedisServer
from benchmarks._results import save_result

BATCH = 100
LEASE_MS = 30_000
OWNER = "bench"
VARIANTS = ("dequeue, no check", "dequeue, no expiry", "dequeue, expiry ahead",
            "dequeue, expired", "forward, no check", "forward, no expiry")


def _without_expiry_read(source: str, read: str, replaced: str) -> str:
    assert read in source, read
    return source.replace(read, replaced)


def scripts() -> dict[str, str]:
    """The shipped dequeue and forward scripts, and copies without their expiry read."""
    shipped = load_scripts()
    dequeue, forward = shipped["dequeue"].source, shipped["forward"].source
    return {
        "dequeue": dequeue,
        "dequeue, no check": _without_expiry_read(
            dequeue, "local expires = not v.err and asyncq_expiry(v[1])",
            "local expires = nil"),
        "forward": forward,
        "forward, no check": _without_expiry_read(_without_expiry_read(
            forward, "local expires = not v.err and asyncq_expiry(v[3])", "local expires = nil"),
            "'HMGET', key, 'state', 'group', 'msg')", "'HMGET', key, 'state', 'group')"),
    }


async def evalsha_usec(redis: Redis) -> tuple[int, int]:
    cmd = (await redis.info("commandstats")).get("cmdstat_evalsha", {})
    return int(cmd.get("calls", 0)), int(cmd.get("usec", 0))


async def one(redis: Redis, url: str, shas: dict[str, str], variant: str, queue: str,
              n: int) -> dict[str, float]:
    qk = K.queue_keys(queue)
    options: dict[str, Any] = {}
    if variant in ("dequeue, expiry ahead", "dequeue, expired"):
        options["expires_in"] = 3600
    if variant.startswith("forward"):
        options["process_in"] = 1
    async with Client(url) as client:
        await client.enqueue_many(Task("t", {"n": i}, queue=queue, **options) for i in range(n))
    now = int(time.time() * 1000) + (7_200_000 if variant == "dequeue, expired" else 5_000)
    calls0, usec0 = await evalsha_usec(redis)
    began = time.perf_counter()
    moved = 0
    if variant.startswith("dequeue"):
        sha = shas["dequeue, no check" if variant.endswith("no check") else "dequeue"]
        keys = [qk.pending, qk.active, qk.lease, qk.paused, qk.waiters, qk.dequeued(OWNER),
                qk.idle, qk.handoff(OWNER)]
        while True:
            args = [now + LEASE_MS, BATCH, qk.task_prefix, OWNER, 1000, "", LEASE_MS,
                    qk.cancel_prefix, "", HANDOFF_GRACE_MS, now, *ARCHIVE_CAPS,
                    EXPIRED_PER_DEQUEUE, K.WAKE_CHANNEL, queue]
            await redis.evalsha(sha, len(keys), *keys, *args)
            left = int(await redis.llen(qk.pending))
            if not left:
                break
        moved = n
    else:
        sha = shas["forward, no check" if variant.endswith("no check") else "forward"]
        keys = [qk.scheduled, qk.pending, qk.groups, qk.waiters]
        while True:
            count, next_due = await redis.evalsha(
                sha, len(keys), *keys, now, BATCH, qk.task_prefix, qk.group_prefix,
                K.WAKE_CHANNEL, queue, *ARCHIVE_CAPS)
            moved += int(count)
            if int(next_due) < 0:
                break
    seconds = time.perf_counter() - began
    calls1, usec1 = await evalsha_usec(redis)
    assert moved == n, (variant, moved)
    if variant == "dequeue, expired":
        assert int(await redis.get(qk.expired) or 0) == n
    return {"redis_us_per_task": (usec1 - usec0) / n, "wall_us_per_task": seconds / n * 1e6,
            "calls": calls1 - calls0}


LOOP = """
local msg = redis.call('HGET', KEYS[1], 'msg')
local t = redis.call('TIME')
local found = 0
for i = 1, tonumber(ARGV[1]) do
  if ARGV[2] == '1' then
    if asyncq_expiry(msg) then found = found + 1 end
  elseif msg then
    found = found + 1
  end
end
local u = redis.call('TIME')
return {(u[1] - t[1]) * 1000000 + (u[2] - t[2]), found}
"""


async def check_alone(redis: Redis, url: str, loops: int) -> dict[str, float]:
    """µs per call of the expiry read (asyncq_expiry) on a message without an expiry and on
    one with, timed inside one script call, less the loop's own cost."""
    reader = (load_scripts()["dequeue"].source.split("local function asyncq_expiry", 1)[1]
              .split("\nend\n", 1)[0])
    sha = await redis.script_load("local function asyncq_expiry" + reader + "\nend\n" + LOOP)
    out: dict[str, float] = {}
    async with Client(url) as client:
        plain = await client.enqueue("t", {"n": 1}, queue="loop")
        expiring = await client.enqueue("t", {"n": 1}, queue="loop", expires_in=3600)
    for name, info in (("without", plain), ("with", expiring)):
        key = K.queue_keys("loop").task(info.id)
        times = {}
        for call in ("0", "1"):
            best = min([(await redis.evalsha(sha, 1, key, loops, call))[0] for _ in range(7)])
            times[call] = best
        out[f"us_per_call_{name}_expiry"] = (times["1"] - times["0"]) / loops
    return out


async def run(tasks: int, rounds: int, loops: int = 1_000_000) -> dict[str, Any]:
    with RedisServer() as server:
        redis = Redis.from_url(server.url)
        shas = {name: await redis.script_load(src) for name, src in scripts().items()}
        alone = await check_alone(redis, server.url, loops)
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        for v in VARIANTS:  # warm-up
            await one(redis, server.url, shas, v, f"warm-{len(runs[v])}-{v[:3]}", 500)
        for r in range(rounds):
            for i, v in enumerate(VARIANTS):
                await redis.flushdb()
                runs[v].append(await one(redis, server.url, shas, v, f"b-{r}-{i}", tasks))
        await redis.aclose()
    out = {v: {"redis_us_per_task": statistics.median(x["redis_us_per_task"] for x in rs),
               "fastest_redis_us_per_task": min(x["redis_us_per_task"] for x in rs),
               "wall_us_per_task": statistics.median(x["wall_us_per_task"] for x in rs),
               "runs": rs} for v, rs in runs.items()}
    now = int(time.time() * 1000)
    plain = prepare(Task("t", {"n": 1}), {}, now).msg.encode()
    expiring = prepare(Task("t", {"n": 1}, expires_in=3600), {}, now).msg.encode()
    return {
        "tasks": tasks, "rounds": rounds, "batch": BATCH, "variants": out,
        "check_alone": {"loops": loops, **alone},
        "unused_dequeue_us_per_task": out["dequeue, no expiry"]["redis_us_per_task"]
        - out["dequeue, no check"]["redis_us_per_task"],
        "unused_forward_us_per_task": out["forward, no expiry"]["redis_us_per_task"]
        - out["forward, no check"]["redis_us_per_task"],
        "used_ahead_dequeue_us_per_task": out["dequeue, expiry ahead"]["redis_us_per_task"]
        - out["dequeue, no expiry"]["redis_us_per_task"],
        "expired_dequeue_us_per_task": out["dequeue, expired"]["redis_us_per_task"],
        "message_bytes": {"without": len(plain), "with": len(expiring)},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "platform": platform.platform()},
    }


def table(doc: dict[str, Any]) -> str:
    lines = ["| variant | Redis µs/task (median) | fastest round | wall µs/task |",
             "|---|---:|---:|---:|"]
    for name, row in doc["variants"].items():
        lines.append(f"| {name} | {row['redis_us_per_task']:.2f} | "
                     f"{row['fastest_redis_us_per_task']:.2f} | "
                     f"{row['wall_us_per_task']:.2f} |")
    alone = doc["check_alone"]
    b = doc["message_bytes"]
    lines += ["", f"the expiry read alone: {alone['us_per_call_without_expiry']:.3f} µs per "
                  f"message without an expiry, {alone['us_per_call_with_expiry']:.3f} µs with one",
              f"unused, dequeue: {doc['unused_dequeue_us_per_task']:+.3f} µs/task; "
                  f"unused, forward: {doc['unused_forward_us_per_task']:+.3f} µs/task; "
                  f"expiry ahead (dequeue): {doc['used_ahead_dequeue_us_per_task']:+.3f} "
                  f"µs/task; archiving an expired task: "
                  f"{doc['expired_dequeue_us_per_task']:.2f} µs/task",
              f"message: {b['without']} bytes, {b['with']} with an expiry "
              f"(+{b['with'] - b['without']})"]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--loops", type=int, default=1_000_000)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    configure_logging("warning")
    doc = asyncio.run(run(args.tasks, args.rounds, args.loops))
    print(table(doc))
    if not args.no_save:
        save_result("expiry", doc)


if __name__ == "__main__":
    main()

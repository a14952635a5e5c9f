"""Limits hold across real worker processes, measured on a ledger of start/end times.

Three worker processes x concurrency 50 share one concurrency limit of 5 and one rate limit of
200/s; keyed limits are independent; a worker SIGKILLed while holding slots frees them when its
leases end; a Redis restart mid-run breaks no limit and loses nothing. Throughput is asserted
as a ratio of what the limit allows, never as a machine speed.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import anyio
import limitapp
import pytest
from limitlib import Runs, limit_workers
from redis.asyncio import Redis

from asyncq import Client, Inspector, Task
from asyncq._broker import _keys as K
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import WorkerFactory, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]


def tasks(kind: str, ledger: str, queue: str, n: int, **payload: object) -> list[Task]:
    return [Task(kind, {"l": ledger, "n": i, **payload}, queue=queue) for i in range(n)]


async def ledger_key(redis: Redis, name: str) -> str:
    key = f"limits-ledger:{{{name}}}:{time.time_ns()}"
    await redis.delete(key)
    return key


async def wait_runs(redis: Redis, key: str, n: int, timeout: float) -> Runs:
    await wait_until(lambda: _count_at_least(redis, key, n), timeout=timeout,
                     message=f"{n} runs recorded")
    return await Runs.read(redis, key)


async def _count_at_least(redis: Redis, key: str, n: int) -> bool:
    return int(await redis.llen(key)) >= n


@pytest.mark.slow
async def test_concurrency_limit_of_5_across_three_workers_of_50(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, redis_client: Redis,
    tmp_path: Path,
) -> None:
    q, n, ms = asyncq_queue, 2000, 100
    key = await ledger_key(redis_client, "conc")
    await asyncq_client.enqueue_many(tasks("lim:conc", key, q, n, ms=ms))
    async with limit_workers(asyncq_redis_url, q, asyncq_redis_url, tmp_path, 3,
                             "--concurrency", "50"):
        runs = await wait_runs(redis_client, key, n, timeout=n * ms / 1000 / 5 * 1.6)
    ideal = limitapp.CONCURRENCY / (ms / 1000)  # tasks per second the limit allows
    achieved = n / runs.span()
    print(f"\nLIMITS concurrency: most at once {runs.most_at_once()}, {achieved:.1f}/s of "
          f"{ideal:.0f}/s ({achieved / ideal:.1%})")
    assert runs.done() == set(range(n)) and len(runs) == n
    assert runs.most_at_once() <= limitapp.CONCURRENCY
    assert achieved >= 0.85 * ideal


@pytest.mark.slow
async def test_rate_limit_of_200_per_second_across_three_workers(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, redis_client: Redis,
    tmp_path: Path,
) -> None:
    """Admissions (read from the limit's own window log, by the Redis clock) never exceed 200
    in any second and sustain >= 90 % of it; the handlers' own start times add only the
    delay between a worker's admission and its handler's first line."""
    q, n, rate = asyncq_queue, 2000, limitapp.RATE
    key = await ledger_key(redis_client, "rate")
    window = K.limit_state(K.limit_base(q, "rate", "lim:rate"), "") + "win"
    admitted: dict[bytes, float] = {}

    async def snapshot() -> None:  # entries live 1 s: reading every 0.2 s misses none
        while True:
            admitted.update(await redis_client.zrange(window, 0, -1, withscores=True))
            await anyio.sleep(0.2)

    await asyncq_client.enqueue_many(tasks("lim:rate", key, q, n))
    async with anyio.create_task_group() as tg:
        tg.start_soon(snapshot)
        async with limit_workers(asyncq_redis_url, q, asyncq_redis_url, tmp_path, 3,
                                 "--concurrency", "50"):
            runs = await wait_runs(redis_client, key, n, timeout=n / rate * 2 + 10)
        admitted.update(await redis_client.zrange(window, 0, -1, withscores=True))
        tg.cancel_scope.cancel()
    admissions = Runs([(0, ms / 1000, ms / 1000, "") for ms in admitted.values()])
    sustained = (n - 1) / admissions.start_span()
    print(f"\nLIMITS rate: most admissions in a 1 s window {admissions.most_starts_in(1.0)}"
          f", most handler starts {runs.most_starts_in(1.0)}, sustained {sustained:.1f}/s "
          f"of {rate}/s ({sustained / rate:.1%})")
    assert runs.done() == set(range(n)) and len(runs) == n and len(admitted) == n
    assert admissions.most_starts_in(1.0) <= rate
    assert sustained >= 0.9 * rate
    # A handler starts a little after its admission; on a loaded machine that delay varies
    # (p99 ~85 ms, max ~230 ms measured on 2 busy cores), which is all that can push a window
    # of handler starts over: 207-223 seen. This bound only catches a limit that is not kept.
    assert runs.most_starts_in(1.0) <= rate * 1.25
    assert (n - 1) / runs.start_span() >= 0.9 * rate


async def test_keyed_limits_are_independent_and_unlimited_types_flow(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, redis_client: Redis,
    tmp_path: Path,
) -> None:
    q, per_tenant, ms = asyncq_queue, 30, 50
    key = await ledger_key(redis_client, "keyed")
    tenants = "abc"
    await asyncq_client.enqueue_many(
        Task("lim:keyed", {"l": key, "n": i * 10 + j, "t": t, "ms": ms}, queue=q)
        for i in range(per_tenant) for j, t in enumerate(tenants))
    await asyncq_client.enqueue_many(
        Task("lim:free", {"l": key, "n": 10_000 + i, "t": "free"}, queue=q) for i in range(50))
    async with limit_workers(asyncq_redis_url, q, asyncq_redis_url, tmp_path, 2,
                             "--concurrency", "20"):
        runs = await wait_runs(redis_client, key, per_tenant * 3 + 50, timeout=40)
    for t in tenants:
        assert runs.most_at_once(t) <= 2, t
    keyed = Runs([r for r in runs.rows if r[3] != "free"])
    assert keyed.most_at_once() >= 5  # the tenants' slots were used at the same time
    ideal = per_tenant / 2 * ms / 1000  # each tenant: 2 at a time
    assert keyed.span() < ideal * 2.5  # not one tenant after the other (3 x ideal)
    free = Runs([r for r in runs.rows if r[3] == "free"])
    assert len(free) == 50 and max(s for _, s, _, _ in free.rows) < max(
        e for _, _, e, _ in keyed.rows)  # the unlimited type did not wait for the others


async def test_sigkilled_worker_slots_free_when_its_leases_end(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str, redis_client: Redis, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q, n, lease = asyncq_queue, 40, 2.0
    key = await ledger_key(redis_client, "kill")
    await asyncq_client.enqueue_many(tasks("lim:conc", key, q, n, ms=400))
    inspector = Inspector(redis_client)

    async def slots_in_use() -> int:
        return sum(u.in_use for u in await inspector.limits(q) if u.kind == "concurrency")

    async with limit_workers(asyncq_redis_url, q, asyncq_redis_url, tmp_path, 1,
                             "--concurrency", "50", "--lease-duration", str(lease),
                             "--heartbeat-interval", "0.5") as (proc,):
        await wait_until(lambda: _count_at_least(redis_client, key, 5), timeout=20,
                         message="first runs done")
        await wait_until(lambda: _equals(slots_in_use, limitapp.CONCURRENCY), timeout=5,
                         message="all slots held")
        proc.send_signal(signal.SIGKILL)
        assert await proc.wait() == -signal.SIGKILL
    killed = time.time()
    assert await slots_in_use() == limitapp.CONCURRENCY  # held by the dead worker's leases
    monkeypatch.setenv(limitapp.LEDGER_URL_ENV, asyncq_redis_url)
    async with asyncq_worker(limitapp.mux, queues={q: 1}, concurrency=50, lease_duration=lease,
                             heartbeat_interval=0.5, recover_interval=0.25, recover_grace=0.25,
                             retry_delay=lambda n, e, t: 0) as w:
        runs = await wait_runs(redis_client, key, n, timeout=30)
        await w.wait_drained(include_scheduled=True, timeout=10)
    after = sorted(s for _, s, _, _ in runs.rows if s > killed)
    assert runs.done() == set(range(n))
    assert runs.most_at_once() <= limitapp.CONCURRENCY
    assert after and after[0] - killed < lease + 1.5  # freed by the lease rule, not leaked
    assert await slots_in_use() == 0
    assert await redis_client.keys(K.queue_keys(q).base + "limit:*held") == []


@pytest.mark.slow
async def test_redis_restart_mid_run_keeps_limits_and_loses_nothing(
    aof_server: RedisServer, asyncq_queue: str, asyncq_redis_url: str, redis_client: Redis,
    tmp_path: Path,
) -> None:
    q, n, ms = asyncq_queue, 400, 50
    key = await ledger_key(redis_client, "restart")
    async with Client(aof_server.url) as client:
        await client.enqueue_many(tasks("lim:conc", key, q, n, ms=ms))
    async with limit_workers(aof_server.url, q, asyncq_redis_url, tmp_path, 3,
                             "--concurrency", "50", "--lease-duration", "3"):
        await wait_until(lambda: _count_at_least(redis_client, key, 60), timeout=30,
                         message="a fifth of the runs done")
        aof_server.stop()
        await anyio.sleep(1.0)  # the outage itself: nothing to wait for
        aof_server.start()
        runs = await wait_runs(redis_client, key, n, timeout=60)
    assert runs.done() == set(range(n))
    assert runs.most_at_once() <= limitapp.CONCURRENCY


async def _equals(read: object, want: int) -> bool:
    return await read() == want  # type: ignore[operator, no-any-return]

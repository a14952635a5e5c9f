"""What users see of limits: Inspector.limits, ``asyncq limit ls``, the deferral metric, the
state of a deferred task; and Limiter, a limit taken by hand."""

from __future__ import annotations

import asyncio
import time

import anyio
import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from redis.asyncio import Redis

import asyncq
from asyncq.metrics import WorkerMetrics
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.cli import Cli
from tests.helpers.prom import key, samples

pytestmark = pytest.mark.anyio


def limited_mux(release: asyncio.Event, started: list[str]) -> asyncq.ServeMux:
    mux = asyncq.ServeMux()

    @mux.handler("api", limits=[asyncq.ConcurrencyLimit(2, key=lambda t: t.json()["t"]),
                                asyncq.RateLimit("1000/m", name="api-rate")])
    async def api(task: asyncq.Task) -> None:
        assert task.id is not None
        started.append(task.id)
        await release.wait()

    return mux


async def test_inspector_cli_and_metrics_show_limits_in_use(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    cli: Cli, redis_client: Redis,
) -> None:
    q = asyncq_queue
    release = asyncio.Event()
    started: list[str] = []
    registry = CollectorRegistry()
    infos = await asyncq_client.enqueue_many(
        asyncq.Task("api", {"t": "acme"}, queue=q) for _ in range(5))
    async with asyncq_worker(limited_mux(release, started), queues={q: 1}, concurrency=10,
                             metrics=WorkerMetrics(registry)) as w:
        await wait_until(lambda: len(started) == 2, timeout=30, message="two started")
        inspector = asyncq.Inspector(redis_client)
        await wait_until(lambda: _waiting(inspector, q, 3), timeout=30, message="3 waiting")
        uses = await inspector.limits(q)
        assert {(u.kind, u.name, u.key, u.limit, u.period_ms, u.in_use, u.waiting)
                for u in uses} == {("concurrency", "api", "acme", 2, 0, 2, 3),
                                   ("rate", "api-rate", "", 1000, 60_000, 2, 0)}
        # A deferred task is scheduled, not failed: it used no retry.
        waiting = [i for i in infos if i.id not in started]
        info = await inspector.task_info(q, waiting[0].id)
        assert info.state == asyncq.TaskState.SCHEDULED and info.retried == 0

        table, doc = [await cli("limit", "ls", *extra) for extra in (("-q", q), ("--json",))]
        lines = table.stdout.decode().splitlines()
        assert lines[0].split() == ["QUEUE", "KIND", "NAME", "KEY", "LIMIT", "SET", "BY", "IN",
                                    "USE", "WAITING"]
        assert [q, "concurrency", "api", "acme", "2", "code", "2", "3"] in [
            ln.split() for ln in lines]
        assert [q, "rate", "api-rate", "-", "1000/60s", "code", "2", "0"] in [
            ln.split() for ln in lines]
        mine = [u for u in orjson.loads(doc.stdout) if u["queue"] == q]
        assert {(u["name"], u["in_use"]) for u in mine} == {("api", 2), ("api-rate", 2)}
        release.set()
        await w.wait_drained(include_scheduled=True, timeout=10)
    deferrals = samples(generate_latest(registry).decode())
    assert deferrals[key("asyncq_worker_task_limit_deferrals_total", queue=q, type="api")] >= 3
    uses = await asyncq.Inspector(redis_client).limits(q)
    assert [(u.name, u.in_use, u.waiting) for u in uses if u.kind == "concurrency"] == [
        ("api", 0, 0)]


async def _waiting(inspector: asyncq.Inspector, queue: str, n: int) -> bool:
    return any(u.waiting == n for u in await inspector.limits(queue))


async def test_limiter_by_hand_shares_the_declared_limit(
    asyncq_client: asyncq.Client, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    limiter = asyncq.Limiter(asyncq_client, asyncq.ConcurrencyLimit(2, name="stripe"), queue=q)
    now = 0
    most = 0

    async def call() -> None:
        nonlocal now, most
        async with limiter.acquire("acme"):
            now += 1
            most = max(most, now)
            await asyncio.sleep(0.02)
            now -= 1

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(call)
    assert most == 2
    with pytest.raises(TimeoutError):
        async with limiter.acquire("acme"), limiter.acquire("acme"), limiter.acquire(
                "acme", timeout=0.05):
            pass
    async with limiter.acquire("other"):  # another key is another budget
        pass

    rate = asyncq.Limiter(asyncq_client, asyncq.RateLimit("5/0.3s", name="r"), queue=q)
    begin = time.monotonic()
    for _ in range(10):
        async with rate.acquire():
            pass
    assert time.monotonic() - begin >= 0.3
    with pytest.raises(ValueError):
        asyncq.Limiter(asyncq_client, asyncq.ConcurrencyLimit(2))  # no name
    with pytest.raises(TypeError):
        asyncq.Limiter(object(), asyncq.ConcurrencyLimit(2, name="x"))


async def test_events_tell_a_deferral_and_the_wake_up(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """A refused task is told active -> scheduled (with when it is due at the latest), then
    scheduled -> pending when the slot it waits for is given back, and it runs."""
    q = asyncq_queue
    release = asyncio.Event()
    started: list[str] = []
    S = asyncq.TaskState
    async with asyncq_client.events(q) as events, \
            asyncq_worker(limited_mux(release, started), queues={q: 1}) as w:
        first = await asyncq_client.enqueue("api", {"t": "x"}, queue=q)
        second = await asyncq_client.enqueue("api", {"t": "x"}, queue=q)
        third = await asyncq_client.enqueue("api", {"t": "x"}, queue=q)
        got: list[asyncq.TaskEvent] = []
        async with asyncio.timeout(10):
            async for event in events:
                assert isinstance(event, asyncq.TaskEvent)
                if event.id == third.id:
                    got.append(event)
                    if event.state is S.SCHEDULED:
                        release.set()
                    if event.state is S.COMPLETED:
                        break
        await w.wait_drained(include_scheduled=True, timeout=10)
    assert {first.id, second.id} <= set(started)
    assert [(e.previous, e.state) for e in got] == [
        (None, S.PENDING), (S.PENDING, S.ACTIVE), (S.ACTIVE, S.SCHEDULED),
        (S.SCHEDULED, S.PENDING), (S.PENDING, S.ACTIVE), (S.ACTIVE, S.COMPLETED)]
    assert got[2].retried == 0 and got[2].next_process_at is not None

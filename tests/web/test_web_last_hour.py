"""The overview's last hour: each queue's workers record its counters and backlog once a
minute (in their janitor round; one sample a minute whoever comes by, 61 kept), the Inspector
turns them into per-minute stats, and the overview charts them and shows the latest minute's
throughput at once."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis

from asyncq import Client, FakeClock, Inspector, ServeMux, Task
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.web.web_helpers import WebFactory

pytestmark = pytest.mark.anyio


async def _ok(task: Task) -> None:
    return None


async def _fail(task: Task) -> None:
    raise RuntimeError("no")


async def test_minute_samples_make_the_last_hour(
        web: WebFactory, asyncq_client: Client, asyncq_worker: WorkerFactory,
        asyncq_queue: str, asyncq_redis_url: str, redis_client: Redis) -> None:
    queue = asyncq_queue
    start = datetime.now(UTC).replace(second=5, microsecond=0) - timedelta(minutes=50)
    clock = FakeClock(start)
    await asyncq_client.enqueue("ok", None, queue=queue)  # the queue exists
    async with Inspector(asyncq_redis_url, clock=clock) as inspector:
        record = inspector.broker.maintenance.record_minute
        mux = ServeMux()
        mux.handle("ok", _ok)
        mux.handle("fails", _fail)
        async with asyncq_worker(mux, queues={queue: 1}) as w:
            await w.wait_drained(queue)
        assert await record(queue)
        assert not await record(queue)  # one sample a minute, whoever comes by
        await asyncq_client.enqueue_many([Task("ok", i, queue=queue) for i in range(3)]
                                         + [Task("fails", None, queue=queue, max_retry=0)])
        async with asyncq_worker(mux, queues={queue: 1}) as w:
            await w.wait_drained(queue)
        await asyncq_client.enqueue_many([Task("ok", i, queue=queue, process_in=3600)
                                          for i in range(2)])
        clock.advance(60)
        assert await record(queue)
        clock.advance(180)  # no worker came by for three minutes
        assert await record(queue)
        stats = await inspector.minute_stats(queue)
    minute = start.replace(second=0)
    assert [(s.at, s.span, s.processed, s.failed, s.backlog) for s in stats] == [
        (minute + timedelta(minutes=1), timedelta(minutes=1), 4, 1, 2),
        (minute + timedelta(minutes=4), timedelta(minutes=3), 0, 0, 2)]

    async with web() as http:
        page = await http.get("/")
    chart = page.text.split('id="last-hour"', 1)[1].split("</figure>", 1)[0]
    values = [int(v) for v in re.findall(r'class="bar processed" data-minute-value="(\d+)"',
                                         chart)]
    assert 4 in values  # (other tests' queues may add minutes of their own)
    assert "<polyline" in chart
    throughput = re.search(r'id="throughput">([^<]*)<', page.text)
    assert throughput and re.fullmatch(r"\d+\.\d /s", throughput.group(1))


async def test_a_workers_janitor_records_its_queues_each_minute(
        asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
        redis_client: Redis) -> None:
    await asyncq_client.enqueue("ok", None, queue=asyncq_queue)
    mux = ServeMux()
    mux.handle("ok", _ok)
    key = K.queue_keys(asyncq_queue).minutes
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, janitor_interval=0.05) as w:
        await wait_until(lambda: redis_client.llen(key), message="a minute sample")
        for _ in range(5):
            await w.worker.janitor.tick()
    samples = [s.split(b":")[0] for s in await redis_client.lrange(key, 0, -1)]
    assert len(samples) == len(set(samples))  # many rounds, one sample a minute


async def test_a_workers_janitor_records_the_queues_no_worker_serves(
        asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
        redis_client: Redis) -> None:
    """The last hour of a queue nobody serves (a backlog piling up, exactly what an operator
    must see) is recorded by any worker's janitor, not only by the queue's own workers."""
    unserved = f"{asyncq_queue}-unserved"
    await asyncq_client.enqueue_many([Task("ok", i, queue=unserved) for i in range(3)])
    mux = ServeMux()
    mux.handle("ok", _ok)
    key = K.queue_keys(unserved).minutes
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, janitor_interval=0.05):
        await wait_until(lambda: redis_client.llen(key), timeout=30,
                         message="a minute sample of the queue no worker serves")
    [sample] = await redis_client.lrange(key, 0, -1)
    assert sample.split(b":")[3] == b"3"  # its backlog
    async with Inspector(asyncq_client.broker) as inspector:  # (other tests list the queues)
        await inspector.delete_queue(unserved, force=True)


async def test_a_janitor_round_samples_a_bounded_window_of_the_registered_queues(
        asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """However many queues there are, one round samples at most MINUTE_SAMPLE_BATCH of them;
    the window goes round every registered queue."""
    from asyncq._worker import _janitor

    monkeypatch.setattr(_janitor, "MINUTE_SAMPLE_BATCH", 4)
    names = [f"{asyncq_queue}-{i}" for i in range(6)]
    await asyncq_client.enqueue_many([Task("ok", None, queue=q) for q in names])
    janitor = _janitor.Janitor(asyncq_client.broker, [], 60, 100)
    every = await asyncq_client.broker.inspect.queue_names()

    async def sampled() -> set[str]:
        return {q for q in names if await redis_client.exists(K.queue_keys(q).minutes)}

    seen: list[int] = []
    for _ in range(-(-len(every) // 4)):  # one cycle: every registered queue once
        before = len(janitor._registered) and janitor._sampled
        await janitor.sample_registered()
        seen.append(janitor._sampled - before)
    assert max(seen) <= 4
    assert await sampled() == set(names)
    async with Inspector(asyncq_client.broker) as inspector:  # (other tests list the queues)
        for q in names:
            await inspector.delete_queue(q, force=True)


async def test_the_dashboard_records_the_last_hour_while_no_worker_lives(
        web: WebFactory, asyncq_client: Client, asyncq_queue: str,
        redis_client: Redis) -> None:
    """No worker at all: the dashboard in use samples every registered queue once a minute,
    so its chart has the minutes when no worker lives."""
    await asyncq_client.enqueue_many([Task("ok", i, queue=asyncq_queue) for i in range(2)])
    key = K.queue_keys(asyncq_queue).minutes
    async with web() as http:
        assert (await http.get("/")).status_code == 200
        assert await redis_client.llen(key) == 1
        assert (await http.get("/live")).status_code == 200
        assert await redis_client.llen(key) == 1  # once a minute

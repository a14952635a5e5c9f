"""Task events: every transition tells its listeners, in order, from inside its Lua script;
and nothing is published while nobody listens."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from redis.asyncio import Redis

import asyncq
from asyncq import (
    Client,
    EventsLost,
    FakeClock,
    Retry,
    ServeMux,
    Task,
    TaskEvent,
    TaskState,
    Worker,
)
from asyncq._broker import Outcome
from asyncq._broker import _keys as K
from asyncq._client._event_hub import EventHub
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio

S = TaskState


async def collect(events: asyncq._client._waiting.EventStream, task_id: str,
                  until: TaskState, timeout: float = 5.0,
                  after: TaskState | None = None) -> list[TaskEvent]:
    """The events of ``task_id`` up to (including) the first one into ``until`` (from
    ``after``, when given)."""
    got: list[TaskEvent] = []
    async with asyncio.timeout(timeout):
        async for event in events:
            assert isinstance(event, TaskEvent), event
            if event.id == task_id:
                got.append(event)
                if event.state is until and after in (None, event.previous):
                    return got
    raise AssertionError("stream ended")


def flaky_mux() -> ServeMux:
    mux = ServeMux()

    @mux.handler("flaky")
    async def flaky(task: Task) -> dict[str, int]:
        if task.retried == 0:
            raise Retry(delay=0.2) from ValueError("first try fails")
        return {"tries": task.retried + 1}

    return mux


async def test_events_tell_every_transition_of_one_task_in_order(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_client.events(asyncq_queue) as events, \
            asyncq_worker(flaky_mux(), queues={asyncq_queue: 1}, forward_interval=0.05):
        info = await asyncq_client.enqueue("flaky", {"n": 1}, queue=asyncq_queue)
        got = await collect(events, info.id, S.COMPLETED)
    assert [(e.previous, e.state) for e in got] == [
        (None, S.PENDING), (S.PENDING, S.ACTIVE), (S.ACTIVE, S.RETRY),
        (S.RETRY, S.PENDING), (S.PENDING, S.ACTIVE), (S.ACTIVE, S.COMPLETED)]
    assert {e.type for e in got} == {"flaky"} and {e.queue for e in got} == {asyncq_queue}
    retry, done = got[2], got[-1]
    assert retry.last_error is not None and "Retry" in retry.last_error
    assert retry.retried == 1 and retry.next_process_at is not None
    assert retry.next_process_at - retry.at <= timedelta(seconds=0.3)
    assert done.result_json() == {"tries": 2} and done.result_encoding == "j"
    assert done.result_kept and done.final  # (a value it returned is kept by default)
    assert [e.at for e in got] == sorted(e.at for e in got)


async def test_scheduled_runs_archives_and_deletes_by_the_inspector_are_told(
    asyncq_client: Client, asyncq_queue: str,
) -> None:
    async with asyncq_client.events(asyncq_queue) as events, \
            asyncq.Inspector(asyncq_client.broker) as inspector:
        info = await asyncq_client.enqueue("t", queue=asyncq_queue, process_in=3600)
        await inspector.run_task(asyncq_queue, info.id)
        await inspector.archive_task(asyncq_queue, info.id)
        await inspector.delete_task(asyncq_queue, info.id)
        got = await collect(events, info.id, S.DELETED)
        grouped = await asyncq_client.enqueue("t", queue=asyncq_queue, group="g")
        [added] = await collect(events, grouped.id, S.AGGREGATING)
    assert [(e.previous, e.state) for e in got] == [
        (None, S.SCHEDULED), (S.SCHEDULED, S.PENDING), (S.PENDING, S.ARCHIVED),
        (S.ARCHIVED, S.DELETED)]
    assert got[0].next_process_at is not None
    assert added.group == "g"


async def test_bulk_inspector_operations_tell_each_task(
    asyncq_client: Client, asyncq_queue: str,
) -> None:
    async with asyncq_client.events(asyncq_queue, states=["archived"]) as events, \
            asyncq.Inspector(asyncq_client.broker) as inspector:
        ids = {(await asyncq_client.enqueue("t", i, queue=asyncq_queue)).id for i in range(3)}
        assert await inspector.archive_all(asyncq_queue, "pending") == 3
        seen = set()
        async with asyncio.timeout(5):
            async for event in events:
                assert isinstance(event, TaskEvent) and event.state is S.ARCHIVED
                seen.add(event.id)
                if seen == ids:
                    break


async def test_nothing_is_published_while_nobody_listens(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    pubsub = redis_client.pubsub()
    await pubsub.ssubscribe(qk.events)  # a raw subscriber that did not set the flag
    mux = ServeMux()

    @mux.handler("t")
    async def noop(task: Task) -> None:
        pass

    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        for i in range(5):
            await asyncq_client.enqueue("t", i, queue=asyncq_queue)
        await w.wait_drained(asyncq_queue)
    assert not await redis_client.exists(qk.listening)
    messages = []
    while (msg := await pubsub.get_message(timeout=0.2)) is not None:
        if msg["type"] == "smessage":
            messages.append(msg)
    assert messages == []
    await pubsub.aclose()


async def test_a_queue_nobody_watches_any_more_stops_publishing(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    hub = EventHub(asyncq_client.broker, flag_ttl=0.6, linger=0.3)
    try:
        await hub.watch([asyncq_queue])
        assert 0 < await redis_client.pttl(qk.listening) <= 600

        async def ttl_below(ms: int) -> bool:
            return 0 < await redis_client.pttl(qk.listening) < ms

        async def ttl_above(ms: int) -> bool:
            return await redis_client.pttl(qk.listening) > ms

        # Renewed while watched: the TTL runs down, then goes back up.
        await wait_until(lambda: ttl_below(450), timeout=30)
        await wait_until(lambda: ttl_above(500), timeout=30)
        hub.unwatch([asyncq_queue])

        async def lapsed() -> bool:
            return not await redis_client.exists(qk.listening)

        await wait_until(lapsed, timeout=30)
    finally:
        await hub.close()


async def test_event_stream_reports_lost_events_after_a_reconnect_and_goes_on(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
) -> None:
    async with asyncq_client.events(asyncq_queue) as events:
        first = await asyncq_client.enqueue("t", queue=asyncq_queue)
        assert (await collect(events, first.id, S.PENDING))[0].state is S.PENDING
        killed = await redis_client.client_kill_filter(_type="pubsub")
        assert killed >= 1
        after = await asyncq_client.enqueue("t", queue=asyncq_queue, task_id="after-kill")
        lost: list[EventsLost] = []
        got: list[TaskEvent] = []
        async with asyncio.timeout(10):
            async for item in events:
                if isinstance(item, EventsLost):
                    lost.append(item)
                    # Events published after the resubscription arrive again.
                    await asyncq_client.enqueue("t", queue=asyncq_queue, task_id="later")
                elif item.id == "later":
                    got.append(item)
                    break
    assert len(lost) == 1 and lost[0].queues == (asyncq_queue,)
    assert lost[0].since <= lost[0].until
    assert got[0].state is S.PENDING
    assert after.id == "after-kill"


async def test_a_slow_stream_reader_is_told_what_it_missed(
    asyncq_client: Client, asyncq_queue: str,
) -> None:
    async with asyncq_client.events(asyncq_queue, buffer=4) as events, \
            asyncq_client.events(asyncq_queue) as witness:
        ids = [info.id for info in await asyncq_client.enqueue_many(  # type: ignore[union-attr]
            [Task("t", i, queue=asyncq_queue) for i in range(9)])]
        await asyncq_client.enqueue("t", queue=asyncq_queue, task_id="last")
        # Once a second (roomy) stream has seen "last", the small one was handed all ten
        # events before its reader read one: it is told it lost some, then reads the newest
        # ones, and nothing after them is lost.
        async with asyncio.timeout(5):
            async for item in witness:
                if isinstance(item, TaskEvent) and item.id == "last":
                    break
        items = []
        async with asyncio.timeout(5):
            async for item in events:
                items.append(item)
                if isinstance(item, TaskEvent) and item.id == "last":
                    break
    assert any(isinstance(i, EventsLost) for i in items)
    seen = [i.id for i in items if isinstance(i, TaskEvent)]
    assert seen[-1] == "last" and len(seen) < len(ids) + 1


async def test_background_transitions_are_told_too(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    """Recovery of an expired lease, requeue at shutdown, expiry after retention and
    aggregation: each publishes its event like a worker's own outcome does."""
    clock = FakeClock()
    worker = Worker(asyncq_redis_url, ServeMux(), clock=clock, queues={asyncq_queue: 1},
                    recover_grace=1, group_aggregator=lambda g, ts: Task("batch", len(ts)),
                    group_grace_period=1)
    broker = worker.broker
    client = Client(broker, clock=clock)
    q = asyncq_queue
    try:
        async with client.events(q) as events:
            lost = await client.enqueue("t", queue=q, task_id="lost")
            await broker.dequeue(q, 1, "dead-worker", 1000, 1000)
            clock.advance(5)
            assert await worker.recoverer.tick() == 1
            recovered = await collect(events, lost.id, S.RETRY)
            assert "LeaseExpiredError" in (recovered[-1].last_error or "")

            await client.enqueue("t", queue=q, task_id="kept", retention=1)
            await client.enqueue("t", queue=q, task_id="back")
            await broker.dequeue(q, 2, "w", 30_000, 1000)
            await broker.finish([Outcome("complete", q, "kept", retention_ms=1000),
                                 Outcome("requeue", q, "back")], "w")
            requeued = await collect(events, "back", S.PENDING, after=S.ACTIVE)
            assert (requeued[-1].previous, requeued[-1].state) == (S.ACTIVE, S.PENDING)
            clock.advance(2)
            assert await worker.janitor.tick() >= 1
            expired = await collect(events, "kept", S.DELETED)
            assert expired[-1].previous is S.COMPLETED

            await client.enqueue("t", 1, queue=q, group="g", task_id="g1")
            clock.advance(2)
            assert worker.aggregator is not None and await worker.aggregator.tick() == 1
            merged = await collect(events, "g1", S.DELETED)
            assert merged[-1].reason == "aggregated" and merged[-1].previous is S.AGGREGATING
    finally:
        await client.close()
        await broker.close()

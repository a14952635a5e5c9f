"""asyncq's Scheduler over Go asynq's layout (``?wire=asynq``): it fires tasks into asynq
queues as Go's scheduler does (an asyncq worker runs them), claims each tick once across
replicas in a key Go ignores, and publishes its entries and history as Go's protobuf records,
which asyncq's Inspector reads back, Go's own records included."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._schedules import GO_ZERO_TIME_S
from asyncq._broker._asynq._schema import SchedulerEnqueueEventPB, SchedulerEntryPB
from asyncq._scheduler import _backend
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio

START = datetime(2030, 1, 1, tzinfo=UTC)
CLOCK_START = START  # the conftest's clock fixture starts here


def ms(when: datetime) -> int:
    return round(when.timestamp() * 1000)


def url_of(redis_url: str) -> str:
    return redis_url + "?wire=asynq"


async def pending_messages(redis: Redis, queue: str) -> list[Any]:
    """The protobuf TaskMessages of the queue's pending tasks, oldest first (as Go dequeues)."""
    qk = K.queue_keys(queue)
    ids = [i.decode() for i in reversed(await redis.lrange(qk.pending, 0, -1))]
    return [_codec.decode(await redis.hget(qk.task(i), "msg")) for i in ids]


async def asyncq_keys_of(redis: Redis, queue: str) -> list[bytes]:
    """Keys of ``queue`` in asyncq's own layout: a wire=asynq scheduler writes none."""
    return await redis.keys(f"asyncq:{{{queue}}}:*")


async def test_a_firing_is_an_asynq_task_an_asyncq_worker_runs(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    url = url_of(asyncq_redis_url)
    ran: list[tuple[str, bytes]] = []
    mux = asyncq.ServeMux()

    @mux.handler("report")
    async def report(task: asyncq.Task) -> None:
        assert task.id is not None
        ran.append((task.id, task.payload))

    events: list[Any] = []
    s = asyncq.Scheduler(url, post_enqueue=lambda info, err: events.append((info, err)))
    s.register("@every 1s", "report", b"\x00weekly", queue=asyncq_queue)
    async with s, asyncq.Worker(url, mux, queues={asyncq_queue: 1}, idle_poll_interval=0.05,
                                heartbeat_interval=1.0):
        await wait_until(lambda: len(ran) >= 2, timeout=10, message="two firings ran")
    assert all(err is None for _, err in events)
    fired = {info.id for info, _ in events if info is not None}
    assert {task_id for task_id, _ in ran} <= fired
    assert {payload for _, payload in ran} == {b"\x00weekly"}
    assert await redis_client.sismember(K.QUEUES, asyncq_queue)
    claims = await redis_client.zrange(K.scheduler_ticks_key(asyncq_queue), 0, -1)
    assert claims == [s.entries()[0].id.encode()]
    assert await asyncq_keys_of(redis_client, asyncq_queue) == []


async def test_the_task_is_stored_as_gos_client_enqueue_stores_it(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    s = asyncq.Scheduler(url_of(asyncq_redis_url), clock=clock)
    s.register("@every 3s", "report", {"n": 1}, queue=asyncq_queue, max_retry=10)
    s.register("@every 3s", "later", queue=asyncq_queue, process_in=60)
    s.register("@every 3s", "grouped", queue=asyncq_queue, group="g1")
    clock.advance(3)
    infos = {i.type: i for i in await s.tick()}
    assert set(infos) == {"report", "later", "grouped"}
    qk = K.queue_keys(asyncq_queue)
    [msg] = await pending_messages(redis_client, asyncq_queue)
    assert (msg.type, msg.payload, msg.queue, msg.retry, msg.timeout, msg.id) == (
        "report", b'{"n":1}', asyncq_queue, 10, 1800, infos["report"].id)  # Go's default timeout
    task = await redis_client.hgetall(qk.task(msg.id))
    assert task[b"state"] == b"pending"
    assert int(task[b"pending_since"]) == ms(START + timedelta(seconds=3)) * 1_000_000
    assert await redis_client.zrange(qk.scheduled, 0, -1, withscores=True) == [
        (infos["later"].id.encode(), ms(START) / 1000 + 63)]
    assert await redis_client.zrange(qk.group("g1"), 0, -1) == [infos["grouped"].id.encode()]
    await s.close()


async def test_replicas_enqueue_each_tick_once(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    a = asyncq.Scheduler(url_of(asyncq_redis_url), clock=clock)
    b = asyncq.Scheduler(url_of(asyncq_redis_url), clock=clock)
    for s in (a, b):
        entry_id = s.register("@every 3s", "report", queue=asyncq_queue)
    fired: list[asyncq.TaskInfo] = []
    for _ in range(10):
        clock.advance(1)
        for infos in await asyncio.gather(a.tick(), b.tick()):  # concurrently too: once
            fired += infos
        fired += await b.tick()
    assert len(fired) == 3
    assert [m.id for m in await pending_messages(redis_client, asyncq_queue)] == \
        [i.id for i in fired]
    assert await redis_client.zscore(K.scheduler_ticks_key(asyncq_queue), entry_id) == \
        ms(START + timedelta(seconds=9))
    for s in (a, b):
        await s.close()


async def test_a_task_id_conflict_consumes_the_tick(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    errors: list[Any] = []
    s = asyncq.Scheduler(url_of(asyncq_redis_url), clock=clock,
                         post_enqueue=lambda info, err: errors.append(err))
    s.register("@every 3s", "nightly", queue=asyncq_queue, task_id="the-one")
    clock.advance(3)
    assert [i.id for i in await s.tick()] == ["the-one"]
    clock.advance(3)
    assert await s.tick() == []
    assert isinstance(errors[-1], asyncq.TaskIDConflictError)
    await s.close()


async def test_entries_and_history_are_gos_protobuf_records(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_backend, "HISTORY_MAX_EVENTS", 4)
    clock = asyncq.FakeClock()  # near real time: Go's readers use the system clock
    s = asyncq.Scheduler(url_of(asyncq_redis_url), clock=clock, timezone="Europe/Berlin",
                         heartbeat_interval=5)
    every = s.register("@every 1s", "report", {"to": "ops"}, queue=asyncq_queue, max_retry=10,
                       timeout=timedelta(minutes=2), retention=timedelta(seconds=90.5),
                       headers={"trace": "on"})
    nightly = s.register("30 2 * * *", "nightly", b"\x00raw", queue=asyncq_queue,
                         deadline=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
                         unique=timedelta(hours=1), unique_key="k1", task_id="fixed-1")
    infos = []
    for _ in range(6):
        clock.advance(1)
        infos += await s.tick()
    await s.heartbeat.beat()
    now = clock.now_ms()

    key = K.scheduler_entries_key(s.id)
    assert await redis_client.zscore(K.SCHEDULERS, key) == (now + 10_000) // 1000
    assert 9_000 < await redis_client.pttl(key) <= 10_000  # 2 x the heartbeat, as Go's
    records = {}
    for raw in await redis_client.lrange(key, 0, -1):
        pb = SchedulerEntryPB.FromString(raw)
        records[pb.id] = pb
    assert set(records) == {every, nightly}

    e = records[every]
    assert (e.spec, e.task_type, e.task_payload) == ("@every 1s", "report", b'{"to":"ops"}')
    assert list(e.enqueue_options) == [
        f'Queue("{asyncq_queue}")', "MaxRetry(10)", "Timeout(2m0s)", "Retention(1m30.5s)",
        'Header(["trace","on"])']
    last_tick_s = ms(infos[-1].enqueued_at) // 1000  # '@every 1s' ticks on whole seconds
    assert (e.prev_enqueue_time.seconds, e.prev_enqueue_time.nanos) == (last_tick_s, 0)
    assert (e.next_enqueue_time.seconds, e.next_enqueue_time.nanos) == (last_tick_s + 1, 0)

    n = records[nightly]
    assert n.spec == "CRON_TZ=Europe/Berlin 30 2 * * *"  # Go publishes no zone otherwise
    assert (n.task_type, n.task_payload) == ("nightly", b"\x00raw")
    assert list(n.enqueue_options) == [
        f'Queue("{asyncq_queue}")', "Deadline(Wed Jan  2 03:04:05 UTC 2030)",
        "Unique(1h0m0s)", 'TaskID("fixed-1")']
    assert n.prev_enqueue_time.seconds == GO_ZERO_TIME_S  # Go's zero time: never enqueued
    assert n.next_enqueue_time.seconds > now // 1000

    history = K.scheduler_history_key(every)
    scored = await redis_client.zrange(history, 0, -1, withscores=True)
    assert len(scored) == 4  # trimmed to the newest, as Go trims
    events = [(SchedulerEnqueueEventPB.FromString(raw), score) for raw, score in scored]
    assert [ev.task_id for ev, _ in events] == [i.id for i in infos[2:]]
    for (ev, score), info in zip(events, infos[2:], strict=True):
        at = ev.enqueue_time.seconds * 1000 + ev.enqueue_time.nanos // 1_000_000
        assert at == ms(info.enqueued_at)
        assert score == at // 1000  # Unix s, as Go scores them
    await s.close()


async def test_inspector_reads_back_its_own_entries_and_gos(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    url = url_of(asyncq_redis_url)
    clock = asyncq.FakeClock()
    s = asyncq.Scheduler(url, clock=clock, timezone="Europe/Berlin")
    eid = s.register("30 2 * * *", "nightly", {"to": "ops"}, queue=asyncq_queue,
                     unique=timedelta(hours=1), unique_key="k1")
    every = s.register("@every 1s", "tick", queue=asyncq_queue)
    clock.advance(1)
    [fired] = await s.tick()
    await s.heartbeat.beat()

    # A Go scheduler's records, as Go writes them (no asyncq extras).
    go_id, go_entry = "go-host:7:6f1c", "3f6c1c9e-0c1b-4a55-9c1e-1b2a3c4d5e6f"
    now_s = clock.now_ms() // 1000
    go = SchedulerEntryPB(id=go_entry, spec="@every 30s", task_type="email:digest",
                          task_payload=b"\x01\x02",
                          enqueue_options=['Queue("critical")', "MaxRetry(3)", "Timeout(1m30s)",
                                           "Deadline(Wed Jan  2 03:04:05 UTC 2030)",
                                           "Unique(1h0m0s)", "ProcessIn(500ms)",
                                           "Retention(24h0m0s)", 'Header(["k","v"])',
                                           "Weird(", "Nonsense(1)"])
    go.next_enqueue_time.seconds = now_s + 30
    go.prev_enqueue_time.seconds = GO_ZERO_TIME_S
    go_key = K.scheduler_entries_key(go_id)
    await redis_client.lpush(go_key, go.SerializeToString())
    await redis_client.zadd(K.SCHEDULERS, {go_key: now_s + 20})
    go_event = SchedulerEnqueueEventPB(task_id="go-task-1")
    go_event.enqueue_time.seconds, go_event.enqueue_time.nanos = now_s - 5, 250_000_000
    await redis_client.zadd(K.scheduler_history_key(go_entry),
                            {go_event.SerializeToString(): now_s - 5})
    await redis_client.lpush(K.scheduler_entries_key("broken"), b"\xff\xff")
    await redis_client.zadd(K.SCHEDULERS, {K.scheduler_entries_key("broken"): now_s + 20})

    async with asyncq.Inspector(url, clock=clock) as inspector:
        entries = {e.id: e for e in await inspector.scheduler_entries()}
        mine = entries[eid]
        assert (mine.spec, mine.timezone, mine.type, mine.json(), mine.scheduler_id) == (
            "30 2 * * *", "Europe/Berlin", "nightly", {"to": "ops"}, s.id)
        assert mine.options == {"queue": asyncq_queue, "unique": 3600.0, "unique_key": "k1"}
        assert mine.prev_enqueue_at is None
        assert entries[every].prev_enqueue_at == fired.enqueued_at.replace(microsecond=0)

        theirs = entries[go_entry]
        assert (theirs.spec, theirs.type, theirs.payload, theirs.encoding, theirs.timezone,
                theirs.scheduler_id, theirs.prev_enqueue_at) == (
            "@every 30s", "email:digest", b"\x01\x02", "b", "", go_id, None)
        assert theirs.next_enqueue_at == datetime.fromtimestamp(now_s + 30, UTC)
        assert theirs.enqueue_options() == {
            "queue": "critical", "max_retry": 3, "timeout": timedelta(seconds=90),
            "deadline": datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
            "unique": timedelta(hours=1), "process_in": timedelta(milliseconds=500),
            "retention": timedelta(hours=24), "headers": {"k": "v"}}

        [mine_event] = await inspector.scheduler_history(every)
        assert (mine_event.task_id, mine_event.queue, mine_event.enqueued_at) == (
            fired.id, asyncq_queue, fired.enqueued_at)
        [go_seen] = await inspector.scheduler_history(go_entry)
        assert (go_seen.task_id, go_seen.queue, go_seen.entry_id) == ("go-task-1", "", go_entry)
        assert go_seen.enqueued_at == go_seen.tick_at
        assert ms(go_seen.enqueued_at) == now_s * 1000 - 4750
        assert await inspector.scheduler_history("no-such-entry") == []
    await s.close()


async def test_expired_schedulers_are_pruned_and_clear_removes_the_entries(
    asyncq_redis_url: str, redis_client: Redis,
) -> None:
    url = url_of(asyncq_redis_url)
    clock = asyncq.FakeClock()
    s = asyncq.Scheduler(url, clock=clock, heartbeat_interval=1)
    s.register("@hourly", "report")
    key = K.scheduler_entries_key(s.id)
    await s.heartbeat.beat()
    async with asyncq.Inspector(url, clock=clock) as inspector:
        assert any(e.scheduler_id == s.id for e in await inspector.scheduler_entries())
        clock.advance(3)  # past the 2 s TTL as far as the index is concerned
        assert not any(e.scheduler_id == s.id for e in await inspector.scheduler_entries())
        assert await redis_client.zscore(K.SCHEDULERS, key) is None
        await s.heartbeat.beat()
        await s.heartbeat.clear()
        assert not await redis_client.exists(key)
        assert await redis_client.zscore(K.SCHEDULERS, key) is None
    await s.close()


async def test_a_queue_of_asyncqs_own_layout_is_refused_and_nothing_written(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    async with asyncq.Client(asyncq_redis_url) as plain:  # asyncq's layout
        await plain.enqueue("report", queue=asyncq_queue)
    errors: list[Any] = []
    s = asyncq.Scheduler(url_of(asyncq_redis_url), clock=clock,
                         post_enqueue=lambda info, err: errors.append(err))
    s.register("@every 3s", "report", queue=asyncq_queue)
    clock.advance(3)
    assert await s.tick() == []
    assert isinstance(errors[0], asyncq.BrokerError)
    assert "?wire=asynq" in str(errors[0]) and "nothing was written" in str(errors[0])
    assert await redis_client.keys(f"asynq:{{{asyncq_queue}}}*") == []
    assert not await redis_client.sismember(K.QUEUES, asyncq_queue)
    await s.close()

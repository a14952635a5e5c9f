"""Scheduler: firing on a FakeClock, hooks, errors, DST, replicas and what it publishes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker import _keys as K
from asyncq._scheduler import _backend, list_scheduler_entries, list_scheduler_events
from asyncq._scheduler._entry import options_from_json, options_to_json
from asyncq._scheduler._spec import parse_spec
from asyncq.testing import wait_until
from tests.helpers.dataplane import lmembers, msg_doc, task_hash

pytestmark = pytest.mark.anyio

# Unix time divisible by 3 s (and by a day): '@every 3s' ticks at +3, +6, +9 from here.
START = datetime(2030, 1, 1, tzinfo=UTC)
CLOCK_START = START  # the conftest's clock fixture starts here
BERLIN = ZoneInfo("Europe/Berlin")


def ms(when: datetime) -> int:
    return round(when.timestamp() * 1000)


async def pending(redis: Redis, queue: str) -> list[dict[str, Any]]:
    """Message documents of the queue's pending tasks, oldest first."""
    ids = list(reversed(await lmembers(redis, K.queue_keys(queue).pending)))
    return [msg_doc(await task_hash(redis, queue, i)) for i in ids]


async def run_for(clock: asyncq.FakeClock, seconds: float, *schedulers: asyncq.Scheduler,
                  step: float = 1.0) -> None:
    """Advance the clock ``step`` at a time, ticking every scheduler after each step."""
    for _ in range(round(seconds / step)):
        clock.advance(step)
        for s in schedulers:
            await s.tick()


# -- item 40: '@every 3s' over 10 s enqueues 3 tasks with the given options


@pytest.mark.parametrize("connection", ["url", "shared client"])
async def test_every_3s_enqueues_three_tasks_in_10s_with_options(
    connection: str, asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
    clock: asyncq.FakeClock,
) -> None:
    redis: str | Redis = asyncq_redis_url if connection == "url" else redis_client
    s = asyncq.Scheduler(redis, clock=clock)
    s.register("@every 3s", "report", {"n": 1}, queue=asyncq_queue, max_retry=10)
    await run_for(clock, 10, s)
    docs = await pending(redis_client, asyncq_queue)
    assert len(docs) == 3
    for doc in docs:
        assert doc["type"] == "report"
        assert doc["queue"] == asyncq_queue
        assert doc["max_retry"] == 10
        assert "timeout" not in doc  # (not given: the handler's, else the default, applies)
    assert [d["enqueued_at"] for d in docs] == [ms(START) + n * 3000 for n in (1, 2, 3)]
    await s.close()
    assert await redis_client.ping()  # a shared client is left open


async def test_scheduler_runs_on_a_broker_given_as_its_own_keyword(
    asyncq_client: asyncq.Client, redis_client: Redis, asyncq_queue: str,
    clock: asyncq.FakeClock,
) -> None:
    broker = asyncq_client.broker
    s = asyncq.Scheduler(broker=broker, clock=clock, heartbeat_interval=60)
    assert s.broker is broker
    s.register("@every 3s", "report", queue=asyncq_queue)
    await run_for(clock, 3, s)
    assert len(await pending(redis_client, asyncq_queue)) == 1
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: s.run(handle_signals=False, task_status=task_status))
        s.stop()
    await broker.ping()  # a broker passed in is left open, also after run()
    m = asyncq.PeriodicTaskManager(broker=broker, provider=list)
    assert m.broker is broker
    await m.scheduler.close()
    await broker.ping()


async def test_task_group_start_returns_once_the_scheduler_fires(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    s = asyncq.Scheduler(asyncq_redis_url)
    s.register("@every 1s", "report", queue=asyncq_queue)
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: s.run(handle_signals=False, task_status=task_status))
        assert s.ready
        s.stop()


# -- item 41: a dead Redis is reported to post_enqueue on every firing


async def test_dead_redis_reports_every_firing_and_keeps_going(clock: asyncq.FakeClock) -> None:
    pre: list[str] = []
    post: list[tuple[Any, Any]] = []
    s = asyncq.Scheduler("redis://127.0.0.1:1/0", clock=clock,
                         pre_enqueue=lambda task, opts: pre.append(task.type),
                         post_enqueue=lambda info, err: post.append((info, err)))
    s.register("@every 3s", "report")
    await run_for(clock, 10, s)
    assert pre == ["report"] * 3
    assert len(post) == 3
    assert all(info is None and isinstance(err, asyncq.BrokerError) for info, err in post)
    assert s.entries()[0].prev_enqueue_at is None  # nothing was enqueued
    await s.close()


# -- item 42: an entry unregistered before start enqueues nothing


async def test_unregistered_entry_enqueues_nothing(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    s = asyncq.Scheduler(asyncq_redis_url, clock=clock)
    entry_id = s.register("@every 3s", "report", queue=asyncq_queue)
    s.unregister(entry_id)
    await run_for(clock, 10, s)
    assert await pending(redis_client, asyncq_queue) == []
    with pytest.raises(ValueError, match="no scheduler entry"):
        s.unregister(entry_id)
    await s.close()


# -- item 43: hooks are called around every firing, sync or async


async def test_pre_and_post_hooks_called_per_firing(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    pre: list[tuple[str, dict[str, Any]]] = []
    post: list[tuple[Any, Any]] = []

    def pre_hook(task: asyncq.Task, options: dict[str, Any]) -> None:
        pre.append((task.type, options))

    async def post_hook(info: asyncq.TaskInfo | None, err: Exception | None) -> None:
        await asyncio.sleep(0)
        post.append((info, err))

    s = asyncq.Scheduler(asyncq_redis_url, clock=clock, pre_enqueue=pre_hook,
                         post_enqueue=post_hook)
    s.register("@every 3s", "report", queue=asyncq_queue, max_retry=2)
    await run_for(clock, 10, s)
    assert pre == [("report", {"queue": asyncq_queue, "max_retry": 2})] * 3
    assert len(post) == 3 and all(err is None for _, err in post)
    stored = await lmembers(redis_client, K.queue_keys(asyncq_queue).pending)
    assert sorted(info.id for info, _ in post) == sorted(stored)
    await s.close()


async def test_a_failing_hook_does_not_stop_firing(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    def boom(*args: Any) -> None:
        raise RuntimeError("hook bug")

    s = asyncq.Scheduler(asyncq_redis_url, clock=clock, pre_enqueue=boom, post_enqueue=boom)
    s.register("@every 3s", "report", queue=asyncq_queue)
    await run_for(clock, 6, s)
    assert len(await pending(redis_client, asyncq_queue)) == 2
    await s.close()


# -- registration: validation and deterministic ids


@pytest.mark.parametrize(("spec", "reason"), [
    ("", "blank"),
    ("* * * *", "expected 5 fields"),
    ("0 0 * * * *", "expected 5 fields"),
    ("61 * * * *", "out of range"),
    ("@fortnightly", "unknown descriptor"),
    ("@every", "needs a duration"),
    ("@every 500ms", "at least 1s"),
    ("@every 3 parsecs", "invalid duration"),
    ("CRON_TZ=Mars/Olympus 0 0 * * *", "unknown time zone"),
])
def test_invalid_spec_is_a_value_error_naming_the_reason(spec: str, reason: str) -> None:
    s = asyncq.Scheduler("redis://127.0.0.1:1/0")
    with pytest.raises(ValueError, match=reason):
        s.register(spec, "report")


def test_bad_options_fail_at_registration() -> None:
    s = asyncq.Scheduler("redis://127.0.0.1:1/0")
    with pytest.raises(TypeError, match="unknown enqueue option"):
        s.register("@daily", "report", max_retries=3)
    with pytest.raises(ValueError, match="queue name"):
        s.register("@daily", "report", queue="wf:x")
    with pytest.raises(ValueError, match="unique_key needs a unique TTL"):
        s.register("@daily", "report", unique_key="k")
    with pytest.raises(ValueError, match="unknown time zone"):
        asyncq.Scheduler("redis://127.0.0.1:1/0", timezone="Nowhere/Land")
    assert s.entries() == []


def test_entry_ids_are_deterministic_and_option_order_insensitive() -> None:
    a = asyncq.Scheduler("redis://127.0.0.1:1/0")
    b = asyncq.Scheduler("redis://127.0.0.1:1/0")
    id_a = a.register("*/5 * * * *", "sync", {"x": 1, "y": 2}, queue="q", max_retry=3,
                      timeout=60)
    id_b = b.register("*/5  *  * * *", "sync", {"y": 2, "x": 1}, timeout=timedelta(minutes=1),
                      max_retry=3, queue="q")
    assert id_a == id_b
    assert a.register("*/5 * * * *", "sync", {"x": 1, "y": 2}, queue="q") != id_a
    berlin = asyncq.Scheduler("redis://127.0.0.1:1/0", timezone="Europe/Berlin")
    assert berlin.register("*/5 * * * *", "sync", {"x": 1, "y": 2}, queue="q", max_retry=3,
                           timeout=60) != id_a
    with pytest.raises(ValueError, match="already registered"):
        a.register("*/5 * * * *", "sync", {"x": 1, "y": 2}, queue="q", max_retry=3, timeout=60)
    assert a.register("*/5 * * * *", "sync", {"x": 1, "y": 2}, queue="q", max_retry=3,
                      timeout=60, entry_id="sync-2") == "sync-2"


def test_options_json_round_trips_every_option() -> None:
    when = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    given: dict[str, Any] = {
        "queue": "critical", "max_retry": 4, "timeout": 90, "deadline": when,
        "process_in": timedelta(seconds=30), "unique": 120, "unique_key": "k",
        "task_id": "fixed", "retention": timedelta(hours=1), "group": "g",
        "headers": {"b": "2", "a": "1"},
    }
    opts = asyncq.Task("t", **given).options
    doc = options_to_json(opts)
    assert doc["timeout"] == 90 and doc["deadline"] == "2031-05-06T07:08:09+00:00"
    assert asyncq.Task("t", **options_from_json(doc)).options == opts
    at = asyncq.Task("t", process_at=when).options
    assert asyncq.Task("t", **options_from_json(options_to_json(at))).options == at


# -- cron edges (pure schedule computation)


def ticks(spec: str, start: datetime, n: int, tz: Any = UTC) -> list[datetime]:
    _, schedule = parse_spec(spec, tz)
    out, t = [], ms(start)
    for _ in range(n):
        t = schedule.next_after(t)
        out.append(datetime.fromtimestamp(t / 1000, tz))
    return out


def test_month_end_and_leap_day_specs() -> None:
    assert [d.month for d in ticks("0 0 31 * *", datetime(2024, 1, 1, tzinfo=UTC), 7)] == \
        [1, 3, 5, 7, 8, 10, 12]  # only months with a 31st
    assert [d.date().isoformat() for d in ticks("0 0 29 2 *", datetime(2023, 1, 1, tzinfo=UTC),
                                                3)] == ["2024-02-29", "2028-02-29", "2032-02-29"]
    assert [d.isoformat() for d in ticks("@monthly", datetime(2024, 1, 31, 12, tzinfo=BERLIN), 2,
                                         BERLIN)] == ["2024-02-01T00:00:00+01:00",
                                                      "2024-03-01T00:00:00+01:00"]
    assert ticks("@yearly", datetime(2024, 6, 1, tzinfo=UTC), 1) == \
        [datetime(2025, 1, 1, tzinfo=UTC)]
    assert ticks("@weekly", datetime(2024, 1, 1, tzinfo=UTC), 1) == \
        [datetime(2024, 1, 7, tzinfo=UTC)]  # Sunday


def test_dst_spring_forward_runs_the_skipped_wall_time_once_after_the_gap() -> None:
    # Europe/Berlin, 2024-03-31: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    got = ticks("30 2 * * *", datetime(2024, 3, 30, 12, tzinfo=BERLIN), 3, BERLIN)
    assert [d.isoformat() for d in got] == [
        "2024-03-31T03:00:00+02:00", "2024-04-01T02:30:00+02:00", "2024-04-02T02:30:00+02:00"]
    ny = ZoneInfo("America/New_York")  # 2024-03-10: 02:00 EST -> 03:00 EDT
    assert ticks("30 2 * * *", datetime(2024, 3, 9, 12, tzinfo=ny), 1, ny)[0].isoformat() == \
        "2024-03-10T03:00:00-04:00"


def test_dst_fall_back_runs_a_fixed_wall_time_once_and_hourly_jobs_every_hour() -> None:
    # Europe/Berlin, 2024-10-27: 03:00 CEST falls back to 02:00 CET; 02:xx happens twice.
    got = ticks("30 2 * * *", datetime(2024, 10, 26, 12, tzinfo=BERLIN), 2, BERLIN)
    assert [d.isoformat() for d in got] == ["2024-10-27T02:30:00+02:00",
                                            "2024-10-28T02:30:00+01:00"]
    hourly = ticks("0 * * * *", datetime(2024, 10, 27, 0, 30, tzinfo=BERLIN), 5, BERLIN)
    assert [d.isoformat() for d in hourly] == [
        "2024-10-27T01:00:00+02:00", "2024-10-27T02:00:00+02:00", "2024-10-27T02:00:00+01:00",
        "2024-10-27T03:00:00+01:00", "2024-10-27T04:00:00+01:00"]
    ny = ZoneInfo("America/New_York")  # 2024-11-03: 02:00 EDT -> 01:00 EST
    assert [d.isoformat() for d in ticks("30 1 * * *", datetime(2024, 11, 2, 12, tzinfo=ny), 2,
                                         ny)] == ["2024-11-03T01:30:00-04:00",
                                                  "2024-11-04T01:30:00-05:00"]


@pytest.mark.parametrize("spec", ["30 2 * * *", "0 * * * *", "*/20 1-3 * * *", "0 0 31 * *"])
def test_ticks_do_not_depend_on_when_they_are_computed(spec: str) -> None:
    """Replicas started at different moments compute the same ticks, across DST changes."""
    _, schedule = parse_spec(spec, BERLIN)
    for start in (datetime(2024, 3, 30, tzinfo=UTC), datetime(2024, 10, 26, tzinfo=UTC)):
        t = ms(start)
        for _ in range(40):
            nxt = schedule.next_after(t)
            for probe in (t + 1, (t + nxt) // 2, nxt - 1):
                assert schedule.next_after(probe) == nxt
            t = nxt


async def test_dst_nights_through_redis(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    clock = asyncq.FakeClock(datetime(2024, 10, 27, 0, 0, tzinfo=BERLIN))
    s = asyncq.Scheduler(asyncq_redis_url, clock=clock, timezone="Europe/Berlin")
    s.register("30 2 * * *", "daily", queue=asyncq_queue)
    s.register("0 * * * *", "hourly", queue=asyncq_queue)
    await run_for(clock, 6 * 3600, s, step=600)  # 00:00 CEST .. 05:00 CET: 6 real hours
    docs = await pending(redis_client, asyncq_queue)
    assert sum(d["type"] == "daily" for d in docs) == 1
    assert sum(d["type"] == "hourly" for d in docs) == 6

    clock.set(datetime(2024, 3, 31, 0, 0, tzinfo=BERLIN))
    spring = asyncq.Scheduler(asyncq_redis_url, clock=clock, timezone="Europe/Berlin")
    daily = spring.register("30 2 * * *", "spring", queue=asyncq_queue)
    await run_for(clock, 4 * 3600, spring, step=600)
    events = await list_scheduler_events(spring.broker, daily, 1, 10)
    assert [e.tick_at for e in events] == [datetime(2024, 3, 31, 3, 0, tzinfo=BERLIN)]
    await s.close()
    await spring.close()


# -- replicas: exactly one task per tick


async def test_two_schedulers_enqueue_each_tick_once(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    a = asyncq.Scheduler(asyncq_redis_url, clock=clock)
    b = asyncq.Scheduler(asyncq_redis_url, clock=clock)
    posts: list[tuple[Any, Any]] = []
    c = asyncq.Scheduler(asyncq_redis_url, clock=clock,
                         post_enqueue=lambda info, err: posts.append((info, err)))
    for s in (a, b, c):
        s.register("@every 3s", "report", {"n": 1}, queue=asyncq_queue)
    for _ in range(10):
        clock.advance(1)
        await a.tick()
        await b.tick()
        await asyncio.gather(c.tick(), b.tick())  # concurrently too: still once
    assert len(await pending(redis_client, asyncq_queue)) == 3
    assert posts == [(None, None)] * 3  # c lost every race: "another replica enqueued it"
    assert {e.prev_enqueue_at for e in c.entries()} == {START + timedelta(seconds=9)}
    for s in (a, b, c):
        await s.close()


@pytest.mark.parametrize(("skew", "expected"), [
    (-1.5, [0, 3, 6, 9, 12, 15, 18]),  # the lagging replica fires tick 0 before anyone else
    (1.5, [3, 6, 9, 12, 15, 18, 21]),  # the leading replica fires every tick, early
    (-4.0, [-3, 3, 6, 9, 12, 15, 18]),  # 0 comes after 3 was claimed: never enqueued
])
async def test_skewed_replicas_enqueue_each_tick_once(
    skew: float, expected: list[int], asyncq_redis_url: str, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    fast = asyncq.FakeClock(START)
    other = asyncq.FakeClock(START + timedelta(seconds=skew))
    a = asyncq.Scheduler(asyncq_redis_url, clock=fast)
    b = asyncq.Scheduler(asyncq_redis_url, clock=other)
    for s in (a, b):
        entry_id = s.register("@every 3s", "report", queue=asyncq_queue)
    for _ in range(40):  # 20 s in 0.5 s steps
        fast.advance(0.5)
        other.advance(0.5)
        await a.tick()
        await b.tick()
    events = await list_scheduler_events(a.broker, entry_id, 1, 100)
    assert [e.tick_at for e in reversed(events)] == \
        [START + timedelta(seconds=n) for n in expected]
    assert len(await pending(redis_client, asyncq_queue)) == len(expected)
    for s in (a, b):
        await s.close()


async def test_a_finished_task_does_not_let_a_late_replica_enqueue_its_tick_again(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    early = asyncq.FakeClock(START)
    late = asyncq.FakeClock(START - timedelta(seconds=1))
    a = asyncq.Scheduler(asyncq_redis_url, clock=early)
    b = asyncq.Scheduler(asyncq_redis_url, clock=late)
    for s in (a, b):
        s.register("@every 3s", "report", queue=asyncq_queue)
    early.advance(3)
    [info] = await a.tick()
    # A worker ran the task and deleted it before the late replica reaches the tick.
    qk = K.queue_keys(asyncq_queue)
    await redis_client.delete(qk.task(info.id))
    await redis_client.lrem(qk.pending, 0, info.id)
    late.advance(4)
    assert await b.tick() == []
    assert await pending(redis_client, asyncq_queue) == []
    for s in (a, b):
        await s.close()


async def test_fixed_task_id_enqueues_while_no_task_has_that_id(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    errors: list[Any] = []
    a = asyncq.Scheduler(asyncq_redis_url, clock=clock,
                         post_enqueue=lambda info, err: errors.append(err))
    b = asyncq.Scheduler(asyncq_redis_url, clock=clock)
    for s in (a, b):
        s.register("@every 3s", "nightly", queue=asyncq_queue, task_id="the-one")
    clock.advance(3)
    assert [i.id for i in await a.tick()] == ["the-one"]
    assert await b.tick() == []
    clock.advance(3)  # the previous run is still queued: this tick reports a conflict ...
    assert await a.tick() == []
    assert isinstance(errors[-1], asyncq.TaskIDConflictError)
    assert await b.tick() == []  # ... and stays claimed, so no replica retries it
    qk = K.queue_keys(asyncq_queue)
    await redis_client.delete(qk.task("the-one"))
    await redis_client.lrem(qk.pending, 0, "the-one")
    clock.advance(3)  # once that task is gone, the next tick enqueues again
    assert [i.id for i in await b.tick()] == ["the-one"]
    for s in (a, b):
        await s.close()


async def test_scheduled_and_group_options_use_their_store_scripts(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    a = asyncq.Scheduler(asyncq_redis_url, clock=clock)
    b = asyncq.Scheduler(asyncq_redis_url, clock=clock)
    for s in (a, b):
        s.register("@every 3s", "later", queue=asyncq_queue, process_in=60)
        s.register("@every 3s", "grouped", queue=asyncq_queue, group="g1")
    clock.advance(3)
    assert len(await a.tick()) == 2
    assert await b.tick() == []
    qk = K.queue_keys(asyncq_queue)
    assert await redis_client.zcard(qk.scheduled) == 1
    assert await redis_client.zcard(qk.group("g1")) == 1
    for s in (a, b):
        await s.close()


async def test_a_long_stall_fires_only_the_newest_due_tick(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, clock: asyncq.FakeClock,
) -> None:
    s = asyncq.Scheduler(asyncq_redis_url, clock=clock)
    s.register("@every 3s", "report", queue=asyncq_queue)
    clock.advance(10)  # ticks +3, +6 and +9 are due: only +9 fires
    await s.tick()
    events = await list_scheduler_events(s.broker, s.entries()[0].id, 1, 10)
    assert [e.tick_at for e in events] == [START + timedelta(seconds=9)]
    assert s.entries()[0].next_enqueue_at == START + timedelta(seconds=12)
    await s.close()


# -- published entries and history


async def test_entries_and_history_are_visible_in_redis(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_backend, "HISTORY_MAX_EVENTS", 4)
    clock = asyncq.FakeClock()  # near real time, so readers on the system clock agree
    s = asyncq.Scheduler(asyncq_redis_url, clock=clock, timezone="Europe/Berlin",
                         heartbeat_interval=5)
    eid = s.register("@every 1s", "report", {"to": "ops"}, queue=asyncq_queue, max_retry=10,
                     timeout=timedelta(minutes=2))
    infos = []
    for _ in range(6):
        clock.advance(1)
        infos += await s.tick()
    await s.heartbeat.beat()
    key = K.scheduler_entries_key(s.id)
    assert 0 < await redis_client.pttl(key) <= 10_000
    assert await redis_client.zscore(K.SCHEDULERS, key) is not None

    entries = [e for e in await list_scheduler_entries(s.broker) if e.id == eid]
    assert len(entries) == 1
    e = entries[0]
    assert (e.spec, e.type, e.json(), e.timezone, e.scheduler_id) == \
        ("@every 1s", "report", {"to": "ops"}, "Europe/Berlin", s.id)
    assert e.options == {"queue": asyncq_queue, "max_retry": 10, "timeout": 120.0}
    assert e.enqueue_options() == {"queue": asyncq_queue, "max_retry": 10,
                                   "timeout": timedelta(minutes=2)}
    assert e.prev_enqueue_at is not None and e.next_enqueue_at is not None
    assert e.next_enqueue_at - e.prev_enqueue_at == timedelta(seconds=1)

    newest = await list_scheduler_events(s.broker, eid, 1, 3)
    assert [ev.task_id for ev in newest] == [i.id for i in reversed(infos)][:3]
    assert all(ev.queue == asyncq_queue and ev.entry_id == eid for ev in newest)
    older = await list_scheduler_events(s.broker, eid, 2, 3)
    assert [ev.task_id for ev in older] == [infos[2].id]  # capped at the 4 newest
    assert await list_scheduler_events(s.broker, "no-such-entry", 1, 10) == []
    with pytest.raises(ValueError, match="page"):
        await list_scheduler_events(s.broker, eid, 0, 10)

    async with asyncq.Inspector(asyncq_redis_url, clock=clock) as inspector:
        assert [x.id for x in await inspector.scheduler_entries() if x.id == eid] == [eid]
        assert [ev.task_id for ev in await inspector.scheduler_history(eid, 1, 2)] == \
            [infos[5].id, infos[4].id]

    await s.heartbeat.clear()
    assert [x for x in await list_scheduler_entries(s.broker) if x.id == eid] == []
    await s.close()


async def test_expired_schedulers_are_pruned_from_the_index(
    asyncq_redis_url: str, redis_client: Redis,
) -> None:
    clock = asyncq.FakeClock()
    s = asyncq.Scheduler(asyncq_redis_url, clock=clock, heartbeat_interval=1)
    s.register("@hourly", "report")
    await s.heartbeat.beat()
    key = K.scheduler_entries_key(s.id)
    assert any(e.scheduler_id == s.id for e in await list_scheduler_entries(s.broker))
    clock.advance(3)  # past the 2 s TTL as far as the index is concerned
    assert not any(e.scheduler_id == s.id for e in await list_scheduler_entries(s.broker))
    assert await redis_client.zscore(K.SCHEDULERS, key) is None
    await redis_client.delete(key)
    await s.close()


# -- the run loop


async def test_async_with_runs_publishes_and_clears_on_exit(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    s = asyncq.Scheduler(asyncq_redis_url)
    s.register("@every 1s", "tick", queue=asyncq_queue)
    key = K.scheduler_entries_key(s.id)
    async with s:
        assert s.ready
        await wait_until(lambda: redis_client.exists(key), timeout=30, message="entries published")
        await wait_until(lambda: redis_client.llen(K.queue_keys(asyncq_queue).pending),
                         timeout=5, message="a task enqueued by the run loop")
        late = s.register("@every 1s", "late", queue=asyncq_queue)  # while running
    assert not await redis_client.exists(key)
    assert await redis_client.zscore(K.SCHEDULERS, key) is None
    with pytest.raises(RuntimeError, match="runs once"):
        await s.run()
    with pytest.raises(RuntimeError, match="stopped"):
        s.register("@every 1s", "again", queue=asyncq_queue)
    assert late


async def test_run_returns_on_stop_and_cancellation_propagates(
    asyncq_redis_url: str, redis_client: Redis,
) -> None:
    s = asyncq.Scheduler(asyncq_redis_url)
    runner = asyncio.create_task(s.run(handle_signals=False))
    await wait_until(lambda: s.ready, timeout=30, message="scheduler ready")
    s.stop()
    await asyncio.wait_for(runner, 5)

    t = asyncq.Scheduler(asyncq_redis_url)
    t.register("@hourly", "report")
    runner = asyncio.create_task(t.run(handle_signals=False))
    key = K.scheduler_entries_key(t.id)
    await wait_until(lambda: redis_client.exists(key), timeout=30, message="entries published")
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert not await redis_client.exists(key)  # cleared even when cancelled

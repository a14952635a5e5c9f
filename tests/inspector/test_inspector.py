"""Inspector: spec §7 items 60-77, pagination edges, bulk operations on 50 000 tasks, bad input."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import anyio
import orjson
import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker import Outcome, RedisBroker, is_broker
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import lmembers, queue_key_names, task_hash, zmembers
from tests.helpers.faults import FaultyBroker

pytestmark = pytest.mark.anyio

OWNER = "test-owner"
# Near the real time: daily counters written at fake times expire 90 days after them.
T0 = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
async def inspector(asyncq_redis_url: str,
                    anyio_backend: object) -> AsyncIterator[asyncq.Inspector]:
    async with asyncq.Inspector(asyncq_redis_url) as ins:
        yield ins


def broker_of(client: asyncq.Client) -> RedisBroker:
    broker = client.broker
    assert isinstance(broker, RedisBroker)
    return broker


async def to_active(client: asyncq.Client, queue: str, task_id: str,
                    lease_ms: int = 30_000) -> None:
    """Lease the oldest pending task (which must be ``task_id``) as a worker would."""
    tasks, _ = await broker_of(client).dequeue(queue, 1, OWNER, lease_ms, 1000)
    assert [t.id for t in tasks] == [task_id]


async def finish(client: asyncq.Client, outcome: Outcome) -> None:
    assert await broker_of(client).finish([outcome], OWNER) == [True]


async def seed(client: asyncq.Client, queue: str) -> dict[str, str]:
    """One task in every state; returns state name -> task id."""
    now = broker_of(client).clock.now_ms()
    ids: dict[str, str] = {}

    async def through_active(name: str, outcome: str | None, **kw: object) -> str:
        info = await client.enqueue(name, {"state": name}, queue=queue)
        await to_active(client, queue, info.id)
        if outcome is not None:
            await finish(client, Outcome(outcome, queue, info.id, **kw))  # type: ignore[arg-type]
        return info.id

    ids["retry"] = await through_active("retry", "retry", retry_at_ms=now + 60_000, error="boom")
    ids["archived"] = await through_active("archived", "archive", error="dead")
    ids["completed"] = await through_active("completed", "complete", retention_ms=3_600_000,
                                            result=b"ok")
    ids["active"] = await through_active("active", None)
    ids["scheduled"] = (await client.enqueue("scheduled", queue=queue, process_in=3600)).id
    ids["aggregating"] = (await client.enqueue("aggregating", queue=queue, group="grp")).id
    ids["pending"] = (await client.enqueue("pending", queue=queue)).id
    return ids


async def task_keys(redis: Redis, queue: str) -> set[str]:
    prefix = K.queue_keys(queue).task_prefix
    return {k for k in await queue_key_names(redis, queue) if k.startswith(prefix)}


# -- 60: queues


async def test_queues_lists_every_queue_with_own_and_shared_client(
    asyncq_client: asyncq.Client, redis_client: Redis, asyncq_redis_url: str, asyncq_queue: str
) -> None:
    other = asyncq_queue + "-b"
    await asyncq_client.enqueue("t", queue=asyncq_queue)
    await asyncq_client.enqueue("t", queue=other)
    async with asyncq.Inspector(asyncq_redis_url) as own:
        assert {asyncq_queue, other} <= set(await own.queues())
    async with asyncq.Inspector(redis_client) as shared:
        names = await shared.queues()
        assert {asyncq_queue, other} <= set(names)
        assert names == sorted(names)
    assert await redis_client.ping()  # a shared client is left open


async def test_inspector_works_through_any_broker(
    asyncq_client: asyncq.Client, asyncq_queue: str
) -> None:
    info = await asyncq_client.enqueue("t", queue=asyncq_queue)
    async with asyncq.Inspector(asyncq_client.broker) as shared:
        assert (await shared.queue_info(asyncq_queue)).pending == 1
    wrapped = FaultyBroker(broker_of(asyncq_client))  # a Broker by protocol only
    assert is_broker(wrapped)
    async with asyncq.Inspector(broker=wrapped) as inspector:
        assert inspector.broker is wrapped
        assert asyncq_queue in await inspector.queues()
        assert (await inspector.task_info(asyncq_queue, info.id)).state is asyncq.TaskState.PENDING
        await inspector.delete_task(asyncq_queue, info.id)
    await asyncq_client.broker.ping()  # a Broker passed in is left open
    with pytest.raises(TypeError, match="not both"):
        asyncq.Inspector("redis://127.0.0.1:1/0", broker=wrapped)  # type: ignore[arg-type]


# -- 61: delete queue


async def test_delete_queue(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    empty, full = asyncq_queue + "-empty", asyncq_queue + "-full"
    info = await asyncq_client.enqueue("t", queue=empty)
    await inspector.delete_task(empty, info.id)
    await inspector.delete_queue(empty)
    assert empty not in await inspector.queues()
    assert await queue_key_names(redis_client, empty) == set()

    ids = await seed(asyncq_client, full)
    await asyncq_client.enqueue("u", queue=full, unique=600)
    with pytest.raises(asyncq.QueueNotEmptyError, match="not empty"):
        await inspector.delete_queue(full)
    # Running tasks are never deleted, even with force.
    with pytest.raises(asyncq.QueueNotEmptyError, match="active"):
        await inspector.delete_queue(full, force=True)
    assert (await inspector.queue_info(full)).size == 8  # nothing was deleted
    await finish(asyncq_client, Outcome("done", full, ids["active"]))
    await inspector.delete_queue(full, force=True)
    assert full not in await inspector.queues()
    assert await queue_key_names(redis_client, full) == set()  # counters, locks, hashes: all gone

    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.delete_queue(full)
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.delete_queue(asyncq_queue + "-never")


# -- 62: queue info


async def test_queue_info_counts_counters_latency(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str
) -> None:
    clock = asyncq.FakeClock(T0)
    async with asyncq.Client(asyncq_redis_url, clock=clock) as client, \
            asyncq.Inspector(asyncq_redis_url, clock=clock) as ins:
        await seed(client, asyncq_queue)
        await client.enqueue("pending2", queue=asyncq_queue)
        due = await client.enqueue("due", queue=asyncq_queue, process_in=10)
        clock.advance(15)
        info = await ins.queue_info(asyncq_queue)
        assert due.state is asyncq.TaskState.SCHEDULED
    assert (info.pending, info.active, info.scheduled, info.retry, info.archived,
            info.completed, info.aggregating, info.groups) == (2, 1, 2, 1, 1, 1, 1, 1)
    assert info.size == 9  # the due scheduled task still counts as scheduled
    assert (info.processed, info.failed) == (3, 2)  # retry + archive + complete; 2 failures
    assert (info.processed_total, info.failed_total) == (3, 2)
    assert info.paused is False
    assert info.latency == timedelta(seconds=15)
    assert info.memory_usage > 0
    assert info.expired_leases == 0
    assert info.timestamp == T0 + timedelta(seconds=15)


async def test_queue_info_of_empty_and_unknown_queue(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    info = await asyncq_client.enqueue("t", queue=asyncq_queue)
    await inspector.delete_task(asyncq_queue, info.id)
    empty = await inspector.queue_info(asyncq_queue)
    assert (empty.size, empty.latency, empty.memory_usage) == (0, timedelta(0), 0)
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.queue_info(asyncq_queue + "-x")


async def test_queue_infos_reads_many_queues_at_once_like_queue_info(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    queues = [f"{asyncq_queue}-{i}" for i in range(30)]
    for i, q in enumerate(queues):
        await asyncq_client.enqueue_many([asyncq.Task("t", n, queue=q) for n in range(i)]
                                         or [asyncq.Task("t", queue=q, process_in=60)])
    await inspector.pause(queues[3])
    many = await inspector.queue_infos([*queues, asyncq_queue + "-unknown"])
    one_by_one = [await inspector.queue_info(q) for q in queues]
    strip = [dataclasses.replace(i, timestamp=T0, latency=timedelta(0)) for i in many[:-1]]
    assert strip == [dataclasses.replace(i, timestamp=T0, latency=timedelta(0))
                     for i in one_by_one]
    assert [i.pending for i in many[:-1]] == list(range(30))
    assert many[3].paused and many[0].scheduled == 1
    assert many[-1].size == 0  # an unknown queue reads as empty
    counts_only = await inspector.queue_infos(queues, memory=False)
    assert [i.pending for i in counts_only] == list(range(30))
    assert all(i.memory_usage == 0 for i in counts_only) and many[5].memory_usage > 0
    known = {i.queue for i in await inspector.queue_infos()}
    assert set(queues) <= known


# -- 63: history


async def test_history_newest_first(
    asyncq_client: asyncq.Client, asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str
) -> None:
    await asyncq_client.enqueue("t", queue=asyncq_queue)
    qk = K.queue_keys(asyncq_queue)
    for i in range(5):
        day = (T0 - timedelta(days=i)).date().isoformat()
        await redis_client.set(qk.processed_day(day), 10 * (i + 1))
        await redis_client.set(qk.failed_day(day), i)
    async with asyncq.Inspector(asyncq_redis_url, clock=asyncq.FakeClock(T0)) as ins:
        stats = await ins.history(asyncq_queue, 7)
        with pytest.raises(ValueError):
            await ins.history(asyncq_queue, 0)
        with pytest.raises(asyncq.QueueNotFoundError):
            await ins.history(asyncq_queue + "-x", 3)
    assert [s.date for s in stats] == [(T0 - timedelta(days=i)).date() for i in range(7)]
    assert [(s.processed, s.failed) for s in stats] == [
        (10, 0), (20, 1), (30, 2), (40, 3), (50, 4), (0, 0), (0, 0)]
    assert {s.queue for s in stats} == {asyncq_queue}


# -- 64: task info


async def test_task_info_per_state(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    ids = await seed(asyncq_client, asyncq_queue)
    infos = {s: await inspector.task_info(asyncq_queue, i) for s, i in ids.items()}
    for state, info in infos.items():
        assert info.state.value == state
        assert info.id == ids[state]
        assert info.queue == asyncq_queue
    now = datetime.now(UTC)
    sched = infos["scheduled"].next_process_at
    assert sched is not None and abs(sched - (now + timedelta(hours=1))) < timedelta(seconds=5)
    retry_at = infos["retry"].next_process_at
    assert retry_at is not None and abs(retry_at - (now + timedelta(minutes=1))) < timedelta(
        seconds=5)
    pending_at = infos["pending"].next_process_at
    assert pending_at is not None and abs(pending_at - now) < timedelta(seconds=5)
    for state in ("active", "archived", "completed", "aggregating"):
        assert infos[state].next_process_at is None
    assert infos["retry"].retried == 1 and infos["retry"].last_error == "boom"
    assert infos["archived"].last_error == "dead" and infos["archived"].last_failed_at
    assert infos["completed"].result == b"ok" and infos["completed"].completed_at
    assert infos["active"].is_orphaned is False
    assert infos["aggregating"].group == "grp"
    assert infos["pending"].payload == b"" and infos["retry"].json() == {"state": "retry"}

    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.task_info(asyncq_queue + "-x", ids["pending"])
    with pytest.raises(asyncq.TaskNotFoundError):
        await inspector.task_info(asyncq_queue, "no-such-id")
    with pytest.raises(ValueError):
        await inspector.task_info(asyncq_queue, " ")


# -- 65, 67: listing


async def test_list_tasks_per_state(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    ids = await seed(asyncq_client, asyncq_queue)
    for state, task_id in ids.items():
        group = "grp" if state == "aggregating" else None
        listed = await inspector.list_tasks(asyncq_queue, state, group=group)
        assert [t.id for t in listed] == [task_id], state
        assert listed[0].state.value == state
    # TaskState values work as well as names; an empty state lists nothing.
    assert await inspector.list_tasks(asyncq_queue, asyncq.TaskState.RETRY) != []
    assert await inspector.list_tasks(asyncq_queue, "aggregating", group="nope") == []
    await inspector.delete_all(asyncq_queue, "completed")
    assert await inspector.list_tasks(asyncq_queue, "completed") == []
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.list_tasks(asyncq_queue + "-x", "pending")


async def test_active_tasks_marked_orphaned_when_lease_expired(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    fresh = await asyncq_client.enqueue("fresh", queue=asyncq_queue)
    await to_active(asyncq_client, asyncq_queue, fresh.id)
    stale = await asyncq_client.enqueue("stale", queue=asyncq_queue)
    await to_active(asyncq_client, asyncq_queue, stale.id, lease_ms=-1000)
    active = {t.id: t for t in await inspector.list_tasks(asyncq_queue, "active")}
    assert active[fresh.id].is_orphaned is False
    assert active[stale.id].is_orphaned is True
    assert [t.id for t in await inspector.list_tasks(asyncq_queue, "active")] == [
        fresh.id, stale.id]  # processing order: dequeued first comes first
    assert (await inspector.task_info(asyncq_queue, stale.id)).is_orphaned is True
    assert (await inspector.queue_info(asyncq_queue)).expired_leases == 1


async def test_archived_listed_oldest_first(
    asyncq_client: asyncq.Client, asyncq_redis_url: str, asyncq_queue: str
) -> None:
    clock = asyncq.FakeClock(T0)
    infos = [await asyncq_client.enqueue("t", {"n": n}, queue=asyncq_queue) for n in range(3)]
    async with asyncq.Inspector(asyncq_redis_url, clock=clock) as ins:
        for info in reversed(infos):
            await ins.archive_task(asyncq_queue, info.id)
            clock.advance(1)
        listed = await ins.list_tasks(asyncq_queue, "archived")
    assert [t.json()["n"] for t in listed] == [2, 1, 0]


# -- 66: pagination


async def test_pagination_pending_and_zset(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    await asyncq_client.enqueue_many(
        [asyncq.Task("t", {"n": n}, queue=asyncq_queue) for n in range(30)])
    base = datetime.now(UTC) + timedelta(hours=1)
    await asyncq_client.enqueue_many([
        asyncq.Task("s", {"n": n}, queue=asyncq_queue, process_at=base + timedelta(seconds=n))
        for n in range(12)])

    async def page(state: str, page: int, size: int) -> list[int]:
        return [t.json()["n"] for t in await inspector.list_tasks(asyncq_queue, state, page, size)]

    assert await page("pending", 1, 5) == [0, 1, 2, 3, 4]
    assert await page("pending", 3, 10) == list(range(20, 30))
    assert await page("pending", 2, 20) == list(range(20, 30))  # last page is partial
    assert await page("pending", 4, 10) == []  # past the end
    assert await page("pending", 100, 30) == []
    assert await page("pending", 1, 1000) == list(range(30))
    assert await page("scheduled", 2, 5) == [5, 6, 7, 8, 9]
    assert await page("scheduled", 3, 5) == [10, 11]
    assert await page("scheduled", 4, 5) == []
    for bad_page, bad_size in ((0, 5), (1, 0), (-1, 5)):
        with pytest.raises(ValueError):
            await inspector.list_tasks(asyncq_queue, "pending", bad_page, bad_size)


# -- 68: delete all


async def test_delete_all_per_state_leaves_other_queues(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    other = asyncq_queue + "-other"
    ids = await seed(asyncq_client, asyncq_queue)
    await seed(asyncq_client, other)
    for state in ("pending", "scheduled", "retry", "archived", "completed", "aggregating"):
        assert await inspector.delete_all(asyncq_queue, state) == 1, state
        assert await inspector.delete_all(asyncq_queue, state) == 0, state
    info = await inspector.queue_info(asyncq_queue)
    assert (info.size, info.active, info.groups) == (1, 1, 0)
    assert await task_keys(redis_client, asyncq_queue) == {
        K.queue_keys(asyncq_queue).task(ids["active"])}
    assert (await inspector.queue_info(other)).size == 7
    with pytest.raises(asyncq.TaskStateError, match="active"):
        await inspector.delete_all(asyncq_queue, "active")


# -- 69: archive all


async def test_archive_all_keeps_existing_archived(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    ids = await seed(asyncq_client, asyncq_queue)
    await asyncq_client.enqueue("p2", queue=asyncq_queue)
    before = time.time() * 1000
    assert await inspector.archive_all(asyncq_queue, "pending") == 2
    assert await inspector.archive_all(asyncq_queue, "scheduled") == 1
    assert await inspector.archive_all(asyncq_queue, "retry") == 1
    assert await inspector.archive_all(asyncq_queue, "aggregating", group="grp") == 1
    archived = await zmembers(redis_client, K.queue_keys(asyncq_queue).archived)
    assert len(archived) == 6 and ids["archived"] in archived
    for task_id, score in archived.items():
        if task_id != ids["archived"]:
            assert before - 1000 <= score <= time.time() * 1000 + 1000
            assert (await task_hash(redis_client, asyncq_queue, task_id))["state"] == b"archived"
    info = await inspector.queue_info(asyncq_queue)
    assert (info.pending, info.scheduled, info.retry, info.aggregating, info.groups) == (
        0, 0, 0, 0, 0)
    assert "pending_since" not in await task_hash(redis_client, asyncq_queue, ids["pending"])
    for state in ("archived", "active"):
        with pytest.raises(asyncq.TaskStateError):
            await inspector.archive_all(asyncq_queue, state)


# -- 70: run all


async def test_run_all_appends_after_existing_pending(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    ids = await seed(asyncq_client, asyncq_queue)
    assert await inspector.run_all(asyncq_queue, "scheduled") == 1
    assert await inspector.run_all(asyncq_queue, "retry") == 1
    assert await inspector.run_all(asyncq_queue, "archived") == 1
    assert await inspector.run_all(asyncq_queue, "aggregating") == 1  # every group
    pending = [t.id for t in await inspector.list_tasks(asyncq_queue, "pending")]
    assert pending == [ids["pending"], ids["scheduled"], ids["retry"], ids["archived"],
                       ids["aggregating"]]
    for task_id in pending:
        fields = await task_hash(redis_client, asyncq_queue, task_id)
        assert fields["state"] == b"pending" and int(fields["pending_since"]) > 0
    for state in ("pending", "active"):
        with pytest.raises(asyncq.TaskStateError):
            await inspector.run_all(asyncq_queue, state)


# -- 71: update payload


async def test_update_task_payload(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    ids = await seed(asyncq_client, asyncq_queue)
    await inspector.update_task_payload(asyncq_queue, ids["scheduled"], {"new": 1})
    info = await inspector.task_info(asyncq_queue, ids["scheduled"])
    assert info.json() == {"new": 1} and info.state is asyncq.TaskState.SCHEDULED
    await inspector.update_task_payload(asyncq_queue, ids["scheduled"], b"\x00raw")
    assert (await inspector.task_info(asyncq_queue, ids["scheduled"])).payload == b"\x00raw"
    with pytest.raises(asyncq.TaskStateError):
        await inspector.update_task_payload(asyncq_queue, ids["pending"], {"x": 1})
    with pytest.raises(asyncq.TaskNotFoundError):
        await inspector.update_task_payload(asyncq_queue, "nope", {"x": 1})
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.update_task_payload(asyncq_queue + "-x", ids["scheduled"], {"x": 1})


# -- 72, 73, 74: one task


async def test_delete_task_each_state(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    ids = await seed(asyncq_client, asyncq_queue)
    for state in ("pending", "scheduled", "retry", "archived", "completed", "aggregating"):
        await inspector.delete_task(asyncq_queue, ids[state])
        with pytest.raises(asyncq.TaskNotFoundError):
            await inspector.task_info(asyncq_queue, ids[state])
    with pytest.raises(asyncq.TaskStateError, match="active"):
        await inspector.delete_task(asyncq_queue, ids["active"])
    with pytest.raises(asyncq.TaskNotFoundError):
        await inspector.delete_task(asyncq_queue, ids["pending"])
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.delete_task(asyncq_queue + "-x", ids["active"])
    info = await inspector.queue_info(asyncq_queue)
    assert (info.size, info.groups) == (1, 0)
    assert not await redis_client.exists(K.queue_keys(asyncq_queue).group("grp"))


async def test_run_task_each_state(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    ids = await seed(asyncq_client, asyncq_queue)
    for state in ("scheduled", "retry", "archived", "completed", "aggregating"):
        await inspector.run_task(asyncq_queue, ids[state])
        info = await inspector.task_info(asyncq_queue, ids[state])
        assert info.state is asyncq.TaskState.PENDING, state
        assert info.completed_at is None
    pending = await lmembers(redis_client, K.queue_keys(asyncq_queue).pending)
    assert pending[-1] == ids["pending"]  # existing pending runs first; run tasks join the end
    with pytest.raises(asyncq.TaskStateError, match="already pending"):
        await inspector.run_task(asyncq_queue, ids["pending"])
    with pytest.raises(asyncq.TaskStateError, match="running"):
        await inspector.run_task(asyncq_queue, ids["active"])
    with pytest.raises(asyncq.TaskNotFoundError):
        await inspector.run_task(asyncq_queue, "nope")
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.run_task(asyncq_queue + "-x", ids["pending"])


async def test_archive_task_each_state(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    ids = await seed(asyncq_client, asyncq_queue)
    for state in ("pending", "scheduled", "retry", "completed", "aggregating"):
        await inspector.archive_task(asyncq_queue, ids[state])
        assert (await inspector.task_info(asyncq_queue, ids[state])).state is (
            asyncq.TaskState.ARCHIVED)
    with pytest.raises(asyncq.TaskStateError, match="already archived"):
        await inspector.archive_task(asyncq_queue, ids["archived"])
    with pytest.raises(asyncq.TaskStateError, match="active"):
        await inspector.archive_task(asyncq_queue, ids["active"])
    with pytest.raises(asyncq.TaskNotFoundError):
        await inspector.archive_task(asyncq_queue, "nope")
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.archive_task(asyncq_queue + "-x", ids["pending"])
    info = await inspector.queue_info(asyncq_queue)
    assert (info.archived, info.active, info.size) == (6, 1, 7)


async def test_unique_locks_released_by_delete_not_by_archive(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    first = await asyncq_client.enqueue("u", {"k": 1}, queue=asyncq_queue, unique=600)
    await inspector.archive_task(asyncq_queue, first.id)
    with pytest.raises(asyncq.DuplicateTaskError):  # archived task still holds its lock
        await asyncq_client.enqueue("u", {"k": 1}, queue=asyncq_queue, unique=600)
    await inspector.delete_task(asyncq_queue, first.id)
    second = await asyncq_client.enqueue("u", {"k": 1}, queue=asyncq_queue, unique=600)
    assert await inspector.delete_all(asyncq_queue, "pending") == 1
    third = await asyncq_client.enqueue("u", {"k": 1}, queue=asyncq_queue, unique=600)
    assert third.id != second.id


async def test_bad_arguments(inspector: asyncq.Inspector, asyncq_client: asyncq.Client,
                             asyncq_queue: str) -> None:
    await asyncq_client.enqueue("t", queue=asyncq_queue)
    with pytest.raises(ValueError, match="unknown task state"):
        await inspector.list_tasks(asyncq_queue, "bogus")
    with pytest.raises(ValueError, match="group"):
        await inspector.list_tasks(asyncq_queue, "aggregating")
    with pytest.raises(ValueError, match="group"):
        await inspector.list_tasks(asyncq_queue, "pending", group="g")
    with pytest.raises(ValueError, match="group"):
        await inspector.delete_all(asyncq_queue, "pending", group="g")
    with pytest.raises(ValueError, match="unknown task state"):
        await inspector.delete_all(asyncq_queue, "bogus")
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.delete_all(asyncq_queue + "-x", "pending")
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.groups(asyncq_queue + "-x")
    with pytest.raises(asyncq.QueueNotFoundError):
        await inspector.pause(asyncq_queue + "-x")


# -- 77: groups


async def test_groups_with_sizes(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str
) -> None:
    for group, n in (("b", 2), ("a", 3)):
        for _ in range(n):
            await asyncq_client.enqueue("t", queue=asyncq_queue, group=group)
    assert await inspector.groups(asyncq_queue) == [asyncq.GroupInfo("a", 3),
                                                    asyncq.GroupInfo("b", 2)]
    assert await inspector.delete_all(asyncq_queue, "aggregating", group="a") == 3
    assert await inspector.groups(asyncq_queue) == [asyncq.GroupInfo("b", 2)]


# -- pause, cancel, servers (with a running worker)


async def test_pause_unpause_and_worker_resumes(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_worker: WorkerFactory,
    asyncq_queue: str,
) -> None:
    seen: list[str] = []

    async def handler(task: asyncq.Task) -> None:
        seen.append(task.type)

    await asyncq_client.enqueue("before", queue=asyncq_queue)
    assert await inspector.pause(asyncq_queue) is True
    assert await inspector.pause(asyncq_queue) is False
    assert (await inspector.queue_info(asyncq_queue)).paused is True
    tasks, _ = await broker_of(asyncq_client).dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)
    assert tasks == []  # a paused queue hands out nothing
    async with asyncq_worker(handler, queues={asyncq_queue: 1}) as w:
        assert await inspector.unpause(asyncq_queue) is True
        assert await inspector.unpause(asyncq_queue) is False
        await w.wait_drained()
    assert seen == ["before"]
    assert (await inspector.queue_info(asyncq_queue)).paused is False


async def test_servers_and_cancel(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, redis_client: Redis,
    asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    started = anyio.Event()

    async def handler(task: asyncq.Task) -> None:
        started.set()
        await anyio.Event().wait()  # runs until the worker cancels it

    # A stale entry (expired score) is pruned from the index on read.
    stale = K.server_key("stale-host:1:dead")
    await redis_client.zadd(K.SERVERS, {stale: 1})
    async with asyncq_worker(handler, queues={asyncq_queue: 1}, concurrency=3,
                             heartbeat_interval=0.1) as w:
        info = await asyncq_client.enqueue("slow", queue=asyncq_queue, max_retry=3)
        with anyio.fail_after(10):
            await started.wait()

        async def mine() -> asyncq.ServerInfo | None:
            for s in await inspector.workers():
                if s.id == w.worker.config.server_id and s.active_workers:
                    return s
            return None

        server = await wait_until(mine, timeout=10, message="server with a worker listed")
        assert server.concurrency == 3 and dict(server.queues) == {asyncq_queue: 1}
        assert server.status == "active"
        assert [a.task_id for a in server.active_workers] == [info.id]
        assert server.active_workers[0].task_type == "slow"
        assert await redis_client.zscore(K.SERVERS, stale) is None

        await inspector.cancel(info.id)

        async def failed() -> asyncq.TaskInfo | None:
            t = await inspector.task_info(asyncq_queue, info.id)
            return None if t.state is asyncq.TaskState.ACTIVE else t

        # A cancelled task fails as usual (the worker decides between retry and archive).
        done = await wait_until(failed, timeout=10, message="cancelled task no longer active")
        assert done.last_error is not None and "cancel" in done.last_error
    assert w.worker.config.server_id not in {s.id for s in await inspector.workers()}


# -- 75: scheduler entries (delegated to asyncq._scheduler._store)


async def test_scheduler_entries_and_history(
    inspector: asyncq.Inspector, redis_client: Redis, asyncq_queue: str
) -> None:
    pytest.importorskip("asyncq._scheduler._store",
                        reason="scheduler store (asyncq._scheduler._store) not available yet")
    entry_id = f"entry-{asyncq_queue}"
    scheduler_key = K.scheduler_entries_key(f"sched-{asyncq_queue}")
    next_ms = int(time.time() * 1000) + 60_000
    await redis_client.rpush(scheduler_key, orjson.dumps({
        "id": entry_id, "spec": "@every 1m", "timezone": "UTC", "type": "report",
        "encoding": "j", "payload": {"a": 1}, "options": {"queue": asyncq_queue},
        "next": next_ms, "prev": None, "scheduler_id": f"sched-{asyncq_queue}"}))
    await redis_client.pexpire(scheduler_key, 60_000)
    await redis_client.zadd(K.SCHEDULERS, {scheduler_key: next_ms})
    history_key = K.scheduler_history_key(entry_id)
    for n in range(5):
        at = next_ms - 60_000 * (5 - n)
        await redis_client.zadd(history_key, {orjson.dumps({
            "entry_id": entry_id, "task_id": f"task-{n}", "queue": asyncq_queue,
            "enqueued_at": at, "tick": at}): at})
    try:
        entries = [e for e in await inspector.scheduler_entries() if e.id == entry_id]
        assert len(entries) == 1 and entries[0].spec == "@every 1m"
        assert entries[0].type == "report"
        events = await inspector.scheduler_history(entry_id, page=1, page_size=3)
        assert [e.task_id for e in events] == ["task-4", "task-3", "task-2"]
        assert [e.task_id for e in await inspector.scheduler_history(entry_id, 2, 3)] == [
            "task-1", "task-0"]
        with pytest.raises(ValueError):
            await inspector.scheduler_history(entry_id, 0, 3)
    finally:
        await redis_client.zrem(K.SCHEDULERS, scheduler_key)
        await redis_client.delete(scheduler_key, history_key)


# -- bulk operations on 50 000 tasks


async def test_bulk_operations_on_50k_tasks(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    n = 50_000
    unique = 100
    tasks = [asyncq.Task("bulk", {"n": i}, queue=asyncq_queue, process_in=3600,
                         **({"unique": 3600} if i < unique else {})) for i in range(n)]
    results = await asyncq_client.enqueue_many(tasks)
    assert all(isinstance(r, asyncq.TaskInfo) for r in results)
    qk = K.queue_keys(asyncq_queue)

    assert await inspector.run_all(asyncq_queue, "scheduled") == n
    info = await inspector.queue_info(asyncq_queue)
    assert (info.pending, info.scheduled) == (n, 0)

    assert await inspector.archive_all(asyncq_queue, "pending") == n
    info = await inspector.queue_info(asyncq_queue)
    assert (info.pending, info.archived) == (0, 10_000)  # the archive keeps 10 000 tasks
    assert len(await task_keys(redis_client, asyncq_queue)) == 10_000  # no orphaned hashes

    assert await inspector.run_all(asyncq_queue, "archived") == 10_000
    assert await inspector.delete_all(asyncq_queue, "pending") == 10_000
    assert await task_keys(redis_client, asyncq_queue) == set()
    locks = [k async for k in redis_client.scan_iter(match=qk.base + "unique:*")]
    assert locks == []  # locks were released as their tasks were dropped or deleted

    await asyncq_client.enqueue_many(
        [asyncq.Task("bulk", {"n": i}, queue=asyncq_queue) for i in range(n)])
    assert await inspector.delete_all(asyncq_queue, "pending") == n
    assert await task_keys(redis_client, asyncq_queue) == set()
    assert (await inspector.queue_info(asyncq_queue)).size == 0


async def test_bulk_operations_loop_over_batches(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    inspector.broker.inspect.batch_size = 7  # each script call takes at most 7 tasks
    base = datetime.now(UTC) + timedelta(hours=1)
    await asyncq_client.enqueue_many([
        asyncq.Task("t", {"n": n}, queue=asyncq_queue, process_at=base + timedelta(seconds=n))
        for n in range(14)])
    for n in range(3):
        await asyncq_client.enqueue("u", {"n": n}, queue=asyncq_queue, unique=600)
    assert await inspector.run_all(asyncq_queue, "scheduled") == 14  # an exact multiple
    pending = await inspector.list_tasks(asyncq_queue, "pending")
    assert [(t.type, t.json()["n"]) for t in pending] == [
        *(("u", n) for n in range(3)), *(("t", n) for n in range(14))]  # run ones join the end
    assert await inspector.archive_all(asyncq_queue, "pending") == 17
    assert await inspector.run_all(asyncq_queue, "archived") == 17
    assert await inspector.delete_all(asyncq_queue, "pending") == 17
    assert await task_keys(redis_client, asyncq_queue) == set()
    assert [k async for k in redis_client.scan_iter(
        match=K.queue_keys(asyncq_queue).base + "unique:*")] == []


# -- times of a task's runs


async def test_each_run_of_a_task_has_its_own_start(
    asyncq_client: asyncq.Client, inspector: asyncq.Inspector, asyncq_queue: str,
    asyncq_worker: WorkerFactory,
) -> None:
    seen: list[asyncq.TaskInfo] = []
    mux = asyncq.ServeMux()

    @mux.handler("flaky")
    async def flaky(task: asyncq.Task) -> None:
        assert task.id is not None
        seen.append(await inspector.task_info(asyncq_queue, task.id))  # as it runs
        if len(seen) == 1:
            raise RuntimeError("first run fails")

    info = await asyncq_client.enqueue("flaky", queue=asyncq_queue, retention=60)
    assert info.enqueued_at is not None
    async with asyncq_worker(mux, queues={asyncq_queue: 1},
                             retry_delay=lambda n, e, t: 0.05) as w:
        await w.wait_drained(include_scheduled=True, timeout=10)
    done = await inspector.task_info(asyncq_queue, info.id)
    first, second = seen
    assert first.state is second.state is asyncq.TaskState.ACTIVE
    assert first.started_at is not None and second.started_at is not None
    assert info.enqueued_at <= first.started_at < second.started_at
    assert first.last_failed_at is None and second.last_failed_at is not None
    assert first.started_at <= second.last_failed_at <= second.started_at
    assert (done.state, done.enqueued_at, done.started_at) == (
        asyncq.TaskState.COMPLETED, info.enqueued_at, second.started_at)
    assert done.completed_at is not None and done.completed_at >= done.started_at

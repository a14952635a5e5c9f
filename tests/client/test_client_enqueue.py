"""Client.enqueue: immediate and scheduled tasks and the options stored with them
(items 44-52, 54)."""

from __future__ import annotations

import uuid
from datetime import timedelta, timezone
from typing import Any

import orjson
import pytest
from client_helpers import (
    HOUR_MS,
)
from redis.asyncio import Redis

from asyncq import (
    Client,
    FakeClock,
    Task,
    TaskIDConflictError,
    TaskState,
)
from asyncq._broker import _keys as K
from tests.helpers.dataplane import (
    dt,
    lmembers,
    msg_doc,
    queue_key_names,
    smembers,
    task_hash,
    zmembers,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ 44: immediate enqueue


async def test_enqueue_now_is_pending_with_defaults(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    now = clock.now_ms()
    info = await client.enqueue("email:send", {"to": "a@b.c"}, queue=asyncq_queue,
                                process_at=dt(now))

    assert info.state is TaskState.PENDING
    assert info.queue == asyncq_queue
    assert info.type == "email:send"
    assert uuid.UUID(info.id).version == 4
    assert info.max_retry == 25
    assert info.retried == 0
    assert info.timeout == timedelta(minutes=30)
    assert info.deadline is None
    assert info.next_process_at == dt(now)
    assert info.retention == timedelta(minutes=10)  # (for a value it returns)
    assert info.group is None
    assert info.json() == {"to": "a@b.c"}

    qk = K.queue_keys(asyncq_queue)
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"pending"
    assert fields["pending_since"] == str(now).encode()
    assert orjson.loads(fields["payload"]) == {"to": "a@b.c"}
    # Mutable fields only appear once something sets them.
    assert not {"retried", "error", "failed_at", "completed_at", "owner", "result",
                "unique_key", "group"} & fields.keys()
    doc = msg_doc(fields)
    assert doc["id"] == info.id
    assert doc["type"] == "email:send"
    assert doc["queue"] == asyncq_queue
    # Options not given are not written: the worker applies its handler's, else the defaults.
    assert not {"max_retry", "timeout", "retention", "deadline"} & doc.keys()
    assert doc["enqueued_at"] == now
    assert await lmembers(redis_client, qk.pending) == [info.id]
    assert asyncq_queue in await smembers(redis_client, K.QUEUES)


async def test_enqueue_without_queue_uses_default_queue(
    client: Client, redis_client: Redis
) -> None:
    info = await client.enqueue("asyncq-test:default-queue", b"x")
    qk = K.queue_keys("default")
    try:
        assert info.queue == "default"
        assert (await task_hash(redis_client, "default", info.id))["state"] == b"pending"
        assert info.id in await lmembers(redis_client, qk.pending)
    finally:  # the default queue is shared with other tests: remove exactly this task
        await redis_client.lrem(qk.pending, 0, info.id)
        await redis_client.delete(qk.task(info.id))


async def test_process_at_in_the_past_is_pending(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    now = clock.now_ms()
    info = await client.enqueue("t", queue=asyncq_queue, process_at=dt(now - HOUR_MS))
    assert info.state is TaskState.PENDING
    assert info.next_process_at == dt(now)
    assert await lmembers(redis_client, K.queue_keys(asyncq_queue).pending) == [info.id]
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).scheduled) == {}


# ------------------------------------------------------------------ 45, 52: scheduling


async def test_process_at_in_the_future_is_scheduled(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    at = clock.now_ms() + HOUR_MS
    info = await client.enqueue("t", b"p", queue=asyncq_queue, process_at=dt(at))

    assert info.state is TaskState.SCHEDULED
    assert info.next_process_at == dt(at)
    qk = K.queue_keys(asyncq_queue)
    assert await zmembers(redis_client, qk.scheduled) == {info.id: at}
    assert await lmembers(redis_client, qk.pending) == []
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"scheduled"
    assert fields["payload"] == b"p"
    assert "pending_since" not in fields


async def test_process_at_accepts_any_timezone(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    at = clock.now_ms() + HOUR_MS
    local = dt(at).astimezone(timezone(timedelta(hours=5, minutes=30)))
    info = await client.enqueue("t", queue=asyncq_queue, process_at=local)
    assert info.next_process_at == dt(at)
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).scheduled) == {info.id: at}


@pytest.mark.parametrize("delay", [3600, 3600.0, timedelta(hours=1)])
async def test_process_in_schedules_relative_to_now(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str, delay: Any
) -> None:
    now = clock.now_ms()
    info = await client.enqueue("t", queue=asyncq_queue, process_in=delay)
    assert info.state is TaskState.SCHEDULED
    assert info.next_process_at == dt(now + HOUR_MS)
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).scheduled) == {
        info.id: now + HOUR_MS}


async def test_process_in_zero_is_pending(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    info = await client.enqueue("t", queue=asyncq_queue, process_in=0)
    assert info.state is TaskState.PENDING
    assert info.next_process_at == dt(clock.now_ms())
    assert await lmembers(redis_client, K.queue_keys(asyncq_queue).pending) == [info.id]


# ------------------------------------------------------------------ 46: max_retry


@pytest.mark.parametrize(("given", "stored"), [(3, 3), (0, 0), (-2, 0)])
async def test_max_retry(client: Client, redis_client: Redis, asyncq_queue: str,
                         given: int, stored: int) -> None:
    info = await client.enqueue("t", queue=asyncq_queue, max_retry=given)
    assert info.max_retry == stored
    assert msg_doc(await task_hash(redis_client, asyncq_queue, info.id))["max_retry"] == stored


async def test_enqueue_options_override_task_options(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    task = Task("t", {"n": 1}, max_retry=2, queue=f"{asyncq_queue}-a", timeout=5)
    info = await client.enqueue(task, max_retry=10, queue=asyncq_queue)
    assert (info.max_retry, info.queue, info.timeout) == (10, asyncq_queue, timedelta(seconds=5))
    doc = msg_doc(await task_hash(redis_client, asyncq_queue, info.id))
    assert (doc["max_retry"], doc["queue"], doc["timeout"]) == (10, asyncq_queue, 5000)
    assert await queue_key_names(redis_client, f"{asyncq_queue}-a") == set()
    # The Task itself is not changed by per-call options: enqueued again, it uses its own.
    again = await client.enqueue(task)
    assert (again.queue, again.max_retry) == (f"{asyncq_queue}-a", 2)


# ------------------------------------------------------------------ 47: queue names


@pytest.mark.parametrize("suffix", ["custom", "MyQueue", "a:b.c_d-e"])
async def test_queue_option_routes_to_that_queue(
    client: Client, redis_client: Redis, asyncq_queue: str, suffix: str
) -> None:
    queue = f"{asyncq_queue}-{suffix}"
    info = await client.enqueue("t", queue=queue)
    assert info.queue == queue
    assert await lmembers(redis_client, f"asyncq:{{{queue}}}:pending") == [info.id]
    assert await redis_client.exists(f"asyncq:{{{queue}}}:t:{info.id}") == 1
    assert queue in await smembers(redis_client, K.QUEUES)
    if queue != queue.lower():  # queue names are case-sensitive
        assert await queue_key_names(redis_client, queue.lower()) == set()


# ------------------------------------------------------------------ 48, 49: timeout, retention


async def test_timeout_only(client: Client, redis_client: Redis, asyncq_queue: str) -> None:
    info = await client.enqueue("t", queue=asyncq_queue, timeout=20)
    assert info.timeout == timedelta(seconds=20)
    assert info.deadline is None
    doc = msg_doc(await task_hash(redis_client, asyncq_queue, info.id))
    assert doc["timeout"] == 20_000
    assert "deadline" not in doc


async def test_deadline_only_has_no_timeout(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    deadline = clock.now_ms() + HOUR_MS
    info = await client.enqueue("t", queue=asyncq_queue, deadline=dt(deadline))
    assert info.timeout is None
    assert info.deadline == dt(deadline)
    doc = msg_doc(await task_hash(redis_client, asyncq_queue, info.id))
    assert doc["deadline"] == deadline
    assert "timeout" not in doc


async def test_timeout_and_deadline_both_stored(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    deadline = clock.now_ms() + HOUR_MS
    info = await client.enqueue("t", queue=asyncq_queue, timeout=timedelta(seconds=90),
                                deadline=dt(deadline))
    assert (info.timeout, info.deadline) == (timedelta(seconds=90), dt(deadline))
    doc = msg_doc(await task_hash(redis_client, asyncq_queue, info.id))
    assert (doc["timeout"], doc["deadline"]) == (90_000, deadline)


async def test_retention(client: Client, redis_client: Redis, asyncq_queue: str) -> None:
    info = await client.enqueue("t", queue=asyncq_queue, retention=timedelta(hours=24))
    assert info.retention == timedelta(hours=24)
    doc = msg_doc(await task_hash(redis_client, asyncq_queue, info.id))
    assert doc["retention"] == 86_400_000


# ------------------------------------------------------------------ 50: groups


async def test_group_task_is_aggregating(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    info = await client.enqueue("t", b"1", queue=asyncq_queue, group="mygroup")
    assert info.state is TaskState.AGGREGATING
    assert info.group == "mygroup"
    assert info.next_process_at is None
    qk = K.queue_keys(asyncq_queue)
    assert await zmembers(redis_client, qk.group("mygroup")) == {info.id: clock.now_ms()}
    assert await smembers(redis_client, qk.groups) == {"mygroup"}
    assert await lmembers(redis_client, qk.pending) == []
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"aggregating"
    assert fields["group"] == b"mygroup"
    assert msg_doc(fields)["group"] == "mygroup"


async def test_group_with_future_process_at_is_scheduled_and_remembers_its_group(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    at = clock.now_ms() + HOUR_MS
    info = await client.enqueue("t", queue=asyncq_queue, group="g", process_at=dt(at))
    assert info.state is TaskState.SCHEDULED
    assert info.group == "g"
    qk = K.queue_keys(asyncq_queue)
    assert await zmembers(redis_client, qk.scheduled) == {info.id: at}
    assert await zmembers(redis_client, qk.group("g")) == {}
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    # The group is kept in the hash so the forwarder sends the task to
    # its group (not to pending) when it comes due.
    assert fields["group"] == b"g"
    assert msg_doc(fields)["group"] == "g"


# ------------------------------------------------------------------ 51: task ids


async def test_custom_task_id_and_conflict(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    info = await client.enqueue("t", b"first", queue=asyncq_queue, task_id="custom_id")
    assert info.id == "custom_id"
    assert (await task_hash(redis_client, asyncq_queue, "custom_id"))["payload"] == b"first"

    with pytest.raises(TaskIDConflictError):
        await client.enqueue("t", b"second", queue=asyncq_queue, task_id="custom_id")
    with pytest.raises(TaskIDConflictError):  # also when it would be scheduled or grouped
        await client.enqueue("t", b"second", queue=asyncq_queue, task_id="custom_id",
                             process_in=60)
    with pytest.raises(TaskIDConflictError):
        await client.enqueue("t", b"second", queue=asyncq_queue, task_id="custom_id",
                             group="g")
    qk = K.queue_keys(asyncq_queue)
    assert (await task_hash(redis_client, asyncq_queue, "custom_id"))["payload"] == b"first"
    assert await lmembers(redis_client, qk.pending) == ["custom_id"]
    assert await zmembers(redis_client, qk.scheduled) == {}
    assert await zmembers(redis_client, qk.group("g")) == {}


async def test_same_task_id_in_another_queue_is_no_conflict(
    client: Client, asyncq_queue: str
) -> None:
    await client.enqueue("t", queue=asyncq_queue, task_id="same")
    other = await client.enqueue("t", queue=f"{asyncq_queue}-b", task_id="same")
    assert other.queue == f"{asyncq_queue}-b"


async def test_id_conflict_leaves_no_stray_unique_lock(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    await client.enqueue("t", b"a", queue=asyncq_queue, task_id="x")
    qk = K.queue_keys(asyncq_queue)
    for extra in ({}, {"process_in": 60}, {"group": "g"}):
        with pytest.raises(TaskIDConflictError):
            await client.enqueue("t", b"b", queue=asyncq_queue, task_id="x", unique=60,
                                 **extra)
        assert await redis_client.exists(qk.unique("t", b"b")) == 0
    # The lock is free, so the same unique task with a fresh id goes through.
    ok = await client.enqueue("t", b"b", queue=asyncq_queue, unique=60)
    assert await redis_client.get(qk.unique("t", b"b")) == ok.id.encode()


# ------------------------------------------------------------------ 54: task options apply


async def test_task_options_apply_and_call_options_override(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    critical = f"{asyncq_queue}-critical"
    task = Task("t", b"x", queue=asyncq_queue, max_retry=7, retention=60, process_in=60)
    info = await client.enqueue(task)
    assert (info.queue, info.max_retry, info.retention, info.state) == (
        asyncq_queue, 7, timedelta(seconds=60), TaskState.SCHEDULED)

    info2 = await client.enqueue(task, queue=critical, process_in=0)
    assert (info2.queue, info2.max_retry, info2.state) == (critical, 7, TaskState.PENDING)
    assert await lmembers(redis_client, K.queue_keys(critical).pending) == [info2.id]

    # process_at given at call time replaces the task's process_in (they are one option).
    at = clock.now_ms() + 2 * HOUR_MS
    info3 = await client.enqueue(task, process_at=dt(at))
    assert info3.next_process_at == dt(at)



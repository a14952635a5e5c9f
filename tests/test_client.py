"""Client.enqueue / enqueue_many against a real Redis (spec §7 items 44-59, in asyncq's terms).

Every test checks the returned TaskInfo and what was written to Redis: the task hash (``msg``
JSON metadata, raw ``payload``, ``state``, ``pending_since``...), list / sorted-set membership and
scores (Unix milliseconds) and uniqueness-lock TTLs.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
from dataplane_helpers import (
    dead_redis_url,
    dt,
    eventually,
    lmembers,
    ms,
    msg_doc,
    next_event,
    queue_key_names,
    smembers,
    task_hash,
    zmembers,
)
from redis.asyncio import Redis

from asyncq import (
    AsyncqError,
    BrokerError,
    Client,
    ConnectionOptions,
    DuplicateTaskError,
    FakeClock,
    Task,
    TaskIDConflictError,
    TaskInfo,
    TaskState,
)
from asyncq import _keys as K
from asyncq._broker import RedisBroker
from asyncq._connection import make_broker

pytestmark = pytest.mark.anyio

HOUR_MS = 3_600_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def client(asyncq_redis_url: str, clock: FakeClock,
                 anyio_backend: object) -> AsyncIterator[Client]:
    async with Client(asyncq_redis_url, clock=clock) as c:
        yield c


def _ok(result: TaskInfo | AsyncqError) -> TaskInfo:
    assert isinstance(result, TaskInfo), result
    return result


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
    assert info.retention == timedelta(0)
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
    assert doc["max_retry"] == 25
    assert doc["timeout"] == 30 * 60 * 1000
    assert "deadline" not in doc
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


# ------------------------------------------------------------------ 53: validation


def _bad_calls(now: datetime) -> list[tuple[type[Exception], tuple[Any, ...], dict[str, Any]]]:
    naive = now.replace(tzinfo=None)
    return [
        (TypeError, (None,), {}),
        (TypeError, (42,), {}),
        (ValueError, ("",), {}),
        (ValueError, ("   ",), {}),
        (ValueError, ("t",), {"queue": ""}),
        (ValueError, ("t",), {"queue": "  "}),
        (ValueError, ("t",), {"queue": "a{b"}),
        (ValueError, ("t",), {"queue": "a}b"}),
        (ValueError, ("t",), {"queue": "a b"}),
        (ValueError, ("t",), {"queue": "a\tb"}),
        (TypeError, ("t",), {"queue": 5}),
        (ValueError, ("t",), {"task_id": ""}),
        (ValueError, ("t",), {"task_id": " \n"}),
        (ValueError, ("t",), {"group": ""}),
        (ValueError, ("t",), {"unique": 0.3}),
        (ValueError, ("t",), {"unique": timedelta(milliseconds=999)}),
        (ValueError, ("t",), {"unique": -5}),
        (ValueError, ("t",), {"unique_key": "k"}),  # a key needs a TTL
        (ValueError, ("t",), {"unique_key": " ", "unique": 10}),
        (ValueError, ("t",), {"timeout": -1}),
        (ValueError, ("t",), {"timeout": float("nan")}),
        (ValueError, ("t",), {"timeout": float("inf")}),
        (ValueError, ("t",), {"process_in": 1e300}),
        (ValueError, ("t",), {"max_retry": 2**64}),
        (ValueError, ("t",), {"retention": timedelta(seconds=-1)}),
        (ValueError, ("t",), {"process_in": -0.5}),
        (ValueError, ("t",), {"deadline": naive}),
        (ValueError, ("t",), {"process_at": naive}),
        (TypeError, ("t",), {"process_at": 1700000000}),
        (ValueError, ("t",), {"process_at": now, "process_in": 5}),
        (TypeError, ("t",), {"max_retry": "3"}),
        (TypeError, ("t",), {"max_retry": True}),
        (TypeError, ("t",), {"timeout": "10"}),
        (TypeError, ("t",), {"headers": {"k": 1}}),
        (TypeError, ("t",), {"headers": [("k", "v")]}),
        (TypeError, ("t",), {"retries": 3}),  # unknown option name
        (TypeError, ("t",), {"Queue": "x"}),
        (ValueError, ("t", object()), {}),  # payload that is not JSON-serialisable
        (TypeError, (Task("t"), b"payload"), {}),  # payload belongs in the Task
    ]


async def test_invalid_enqueue_calls_raise_and_write_nothing(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    for exc_type, args, kwargs in _bad_calls(dt(clock.now_ms())):
        kwargs.setdefault("queue", asyncq_queue)
        with pytest.raises(exc_type):
            await client.enqueue(*args, **kwargs)
    assert await queue_key_names(redis_client, asyncq_queue) == set()
    assert asyncq_queue not in await smembers(redis_client, K.QUEUES)


def test_invalid_task_options_raise_at_construction() -> None:
    with pytest.raises(ValueError, match="blank"):
        Task("t", queue=" ")
    with pytest.raises(ValueError, match="at least 1 second"):
        Task("t", unique=0.5)
    with pytest.raises(TypeError, match="unknown enqueue option"):
        Task("t", proces_in=5)


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


# ------------------------------------------------------------------ 55, 56: uniqueness


async def test_unique_lock_and_duplicate(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    payload = {"user": 42}
    info = await client.enqueue("report", payload, queue=asyncq_queue, unique=HOUR_MS / 1000)
    raw = orjson.dumps(payload)
    lock = f"asyncq:{{{asyncq_queue}}}:unique:t:report:{hashlib.md5(raw).hexdigest()}"
    assert await redis_client.get(lock) == info.id.encode()
    ttl = await redis_client.pttl(lock)
    assert HOUR_MS - 5_000 < ttl <= HOUR_MS
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["unique_key"] == lock.encode()
    assert msg_doc(fields)["unique_key"] == lock

    with pytest.raises(DuplicateTaskError):
        await client.enqueue("report", payload, queue=asyncq_queue, unique=3600)
    with pytest.raises(DuplicateTaskError):  # a duplicate even when it would be scheduled
        await client.enqueue("report", payload, queue=asyncq_queue, unique=3600, process_in=5)
    assert await lmembers(redis_client, K.queue_keys(asyncq_queue).pending) == [info.id]
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).scheduled) == {}

    # Another payload, type or queue is another lock.
    await client.enqueue("report", {"user": 43}, queue=asyncq_queue, unique=3600)
    await client.enqueue("report2", payload, queue=asyncq_queue, unique=3600)
    await client.enqueue("report", payload, queue=f"{asyncq_queue}-2", unique=3600)
    # A task that is not unique is never blocked by the lock.
    await client.enqueue("report", payload, queue=asyncq_queue)


async def test_unique_ignores_json_key_order(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    """Equal dicts are the same payload for uniqueness, whatever order their keys were added."""
    info = await client.enqueue("t", {"a": 1, "b": {"y": [1, {"q": 1, "p": 2}], "x": 2}},
                                queue=asyncq_queue, unique=60)
    with pytest.raises(DuplicateTaskError):
        await client.enqueue("t", {"b": {"x": 2, "y": [1, {"p": 2, "q": 1}]}, "a": 1},
                             queue=asyncq_queue, unique=60)
    # The payload itself is stored as given.
    stored = (await task_hash(redis_client, asyncq_queue, info.id))["payload"]
    assert stored == b'{"a":1,"b":{"y":[1,{"q":1,"p":2}],"x":2}}'
    # List order still matters.
    await client.enqueue("t", {"a": 1, "b": {"y": [{"q": 1, "p": 2}, 1], "x": 2}},
                         queue=asyncq_queue, unique=60)


async def test_unique_without_payload_uses_empty_digest(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    info = await client.enqueue("ping", queue=asyncq_queue, unique=10)
    assert await redis_client.get(f"asyncq:{{{asyncq_queue}}}:unique:t:ping:") == info.id.encode()
    empty = await client.enqueue("ping", b"", queue=asyncq_queue, unique=10)
    lock = f"asyncq:{{{asyncq_queue}}}:unique:t:ping:{hashlib.md5(b'').hexdigest()}"
    assert await redis_client.get(lock) == empty.id.encode()


async def test_explicit_unique_key(client: Client, redis_client: Redis, asyncq_queue: str) -> None:
    info = await client.enqueue("sync", {"v": 1}, queue=asyncq_queue, unique=30,
                                unique_key="account-7")
    lock = f"asyncq:{{{asyncq_queue}}}:unique:k:account-7"
    assert await redis_client.get(lock) == info.id.encode()
    with pytest.raises(DuplicateTaskError):  # other payload and type, same key
        await client.enqueue("other", {"v": 2}, queue=asyncq_queue, unique=30,
                             unique_key="account-7")


@pytest.mark.parametrize("how", ["process_in", "process_at"])
async def test_unique_scheduled_lock_outlives_the_wait(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str, how: str
) -> None:
    wait_ms, ttl_ms = 30 * 60 * 1000, 10 * 60 * 1000
    when: Any = wait_ms / 1000 if how == "process_in" else dt(clock.now_ms() + wait_ms)
    info = await client.enqueue("t", b"p", queue=asyncq_queue, unique=ttl_ms / 1000,
                                **{how: when})
    assert info.state is TaskState.SCHEDULED
    lock = K.queue_keys(asyncq_queue).unique("t", b"p")
    ttl = await redis_client.pttl(lock)
    assert wait_ms + ttl_ms - 5_000 < ttl <= wait_ms + ttl_ms
    with pytest.raises(DuplicateTaskError):
        await client.enqueue("t", b"p", queue=asyncq_queue, unique=ttl_ms / 1000)
    with pytest.raises(DuplicateTaskError):
        await client.enqueue("t", b"p", queue=asyncq_queue, unique=1, **{how: when})


async def test_unique_group_task(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    info = await client.enqueue("t", b"p", queue=asyncq_queue, group="g", unique=60)
    lock = K.queue_keys(asyncq_queue).unique("t", b"p")
    assert await redis_client.get(lock) == info.id.encode()
    with pytest.raises(DuplicateTaskError):
        await client.enqueue("t", b"p", queue=asyncq_queue, group="g", unique=60)
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).group("g")) == {
        info.id: clock.now_ms()}


# ------------------------------------------------------------------ 57: headers


async def test_headers_stored_and_returned(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    task = Task("t", queue=asyncq_queue, headers={"trace": "abc", "lang": "en"})
    info = await client.enqueue(task)
    assert info.headers == {"trace": "abc", "lang": "en"}
    doc = msg_doc(await task_hash(redis_client, asyncq_queue, info.id))
    assert doc["headers"] == {"trace": "abc", "lang": "en"}

    # Call-time headers are merged over the task's (same key: the call wins).
    merged = await client.enqueue(task, headers={"lang": "fr", "tenant": "t1"})
    assert merged.headers == {"trace": "abc", "lang": "fr", "tenant": "t1"}
    doc = msg_doc(await task_hash(redis_client, asyncq_queue, merged.id))
    assert doc["headers"] == {"trace": "abc", "lang": "fr", "tenant": "t1"}
    assert task.headers == {"trace": "abc", "lang": "en"}  # the Task is not mutated


async def test_no_headers(client: Client, redis_client: Redis, asyncq_queue: str) -> None:
    for headers in (None, {}):
        info = await client.enqueue("t", queue=asyncq_queue, headers=headers)
        assert info.headers == {}
        doc = msg_doc(await task_hash(redis_client, asyncq_queue, info.id))
        assert doc.get("headers", {}) == {}
    assert Task("t").headers == {}


async def test_headers_kept_for_scheduled_and_group_tasks(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    for extra in ({"process_in": 60}, {"group": "g"}):
        info = await client.enqueue("t", queue=asyncq_queue, headers={"h": "v"}, **extra)
        assert info.headers == {"h": "v"}
        doc = msg_doc(await task_hash(redis_client, asyncq_queue, info.id))
        assert doc["headers"] == {"h": "v"}


# ------------------------------------------------------------------ 58, 59: enqueue_many


async def test_enqueue_many_immediate(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    tasks = [Task("t", {"n": i}, queue=asyncq_queue) for i in range(3)]
    results = await client.enqueue_many(tasks)
    infos = [_ok(r) for r in results]
    assert [i.state for i in infos] == [TaskState.PENDING] * 3
    assert [i.queue for i in infos] == [asyncq_queue] * 3
    assert [i.json() for i in infos] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert len({i.id for i in infos}) == 3
    # FIFO: the first task of the batch is the first to be dequeued (tail of the list).
    pending = await lmembers(redis_client, K.queue_keys(asyncq_queue).pending)
    assert pending[::-1] == [i.id for i in infos]
    for i in infos:
        fields = await task_hash(redis_client, asyncq_queue, i.id)
        assert fields["state"] == b"pending"
        assert fields["pending_since"] == str(clock.now_ms()).encode()


async def test_enqueue_many_scheduled(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    at = clock.now_ms() + HOUR_MS
    results = await client.enqueue_many([Task("t", queue=asyncq_queue, process_at=dt(at))])
    info = _ok(results[0])
    assert info.state is TaskState.SCHEDULED
    assert info.next_process_at == dt(at)
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).scheduled) == {info.id: at}
    assert (await task_hash(redis_client, asyncq_queue, info.id))["state"] == b"scheduled"


async def test_enqueue_many_mixed_batch_has_per_item_results(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    other = f"{asyncq_queue}-o"
    await client.enqueue("t", queue=asyncq_queue, task_id="taken")
    tasks = [
        Task("t", b"0", queue=asyncq_queue),
        Task("t", b"1", queue=asyncq_queue, process_in=60),
        Task("t", b"2", queue=asyncq_queue, group="g"),
        Task("t", b"3", queue=asyncq_queue, unique=60),
        Task("t", b"3", queue=asyncq_queue, unique=60),  # duplicate of the previous item
        Task("t", b"5", queue=asyncq_queue, task_id="taken"),  # id conflict
        Task("t", b"6", queue=other, task_id="taken"),  # same id, other queue: fine
        Task("t", b"7", queue=asyncq_queue, task_id="dup"),
        Task("t", b"8", queue=asyncq_queue, task_id="dup"),  # conflicts with item 7
    ]
    results = await client.enqueue_many(tasks)
    assert len(results) == len(tasks)
    assert [type(r) for r in results] == [
        TaskInfo, TaskInfo, TaskInfo, TaskInfo, DuplicateTaskError, TaskIDConflictError,
        TaskInfo, TaskInfo, TaskIDConflictError]
    states = [r.state for r in results if isinstance(r, TaskInfo)]
    assert states == [TaskState.PENDING, TaskState.SCHEDULED, TaskState.AGGREGATING,
                      TaskState.PENDING, TaskState.PENDING, TaskState.PENDING]
    r0, r1, r2, r3 = (_ok(r) for r in results[:4])
    qk = K.queue_keys(asyncq_queue)
    assert set(await lmembers(redis_client, qk.pending)) == {"taken", r0.id, r3.id, "dup"}
    assert await zmembers(redis_client, qk.scheduled) == {r1.id: clock.now_ms() + 60_000}
    assert await zmembers(redis_client, qk.group("g")) == {r2.id: clock.now_ms()}
    assert await redis_client.get(qk.unique("t", b"3")) == r3.id.encode()
    assert (await task_hash(redis_client, asyncq_queue, "dup"))["payload"] == b"7"
    assert (await task_hash(redis_client, asyncq_queue, "taken"))["payload"] == b""
    assert await lmembers(redis_client, K.queue_keys(other).pending) == ["taken"]


async def test_enqueue_many_empty(client: Client) -> None:
    assert await client.enqueue_many([]) == []


async def test_enqueue_many_validates_everything_before_sending(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    good = Task("t", queue=asyncq_queue)
    with pytest.raises(TypeError, match="item 1"):
        await client.enqueue_many([good, None, good])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="item 2"):
        await client.enqueue_many([good, good, "t"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="item 1"):
        await client.enqueue_many([good, Task("t", queue=asyncq_queue, unique_key="k")])
    assert await queue_key_names(redis_client, asyncq_queue) == set()


async def test_enqueue_many_large_batch(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    n = 2_500  # more than one pipeline chunk
    results = await client.enqueue_many(Task("t", i, queue=asyncq_queue) for i in range(n))
    assert all(isinstance(r, TaskInfo) for r in results)
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == n


async def test_enqueue_with_redis_down() -> None:
    async with Client(dead_redis_url()) as client:
        with pytest.raises(BrokerError):
            await client.enqueue("t", queue="q")
        results = await client.enqueue_many([Task("t"), Task("t", process_in=5)])
        assert len(results) == 2
        assert all(isinstance(r, BrokerError) for r in results)


# ------------------------------------------------------------------ connections


async def test_client_on_callers_redis_leaves_it_open(
    redis_client: Redis, asyncq_queue: str
) -> None:
    conn_id = await redis_client.client_id()
    client = Client(redis_client)
    await client.enqueue("t", queue=asyncq_queue)
    await client.close()
    # Same connection still open: had the client closed it, a new one (new id) would be made.
    assert await redis_client.client_id() == conn_id
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == 1


async def test_client_on_callers_broker_leaves_it_open(
    asyncq_redis_url: str, asyncq_queue: str
) -> None:
    broker = make_broker(asyncq_redis_url)
    try:
        conn_id = await broker.redis.client_id()
        async with Client(broker) as client:
            await client.enqueue("t", queue=asyncq_queue)
        assert await broker.redis.client_id() == conn_id
    finally:
        await broker.close()


async def test_client_takes_a_broker_as_its_own_keyword(
    asyncq_redis_url: str, asyncq_queue: str
) -> None:
    broker = make_broker(asyncq_redis_url)
    try:
        async with Client(broker=broker) as client:
            assert client.broker is broker
            await client.enqueue("t", queue=asyncq_queue)
        await broker.ping()  # left open: it is the caller's
        with pytest.raises(TypeError, match="not both"):
            Client(asyncq_redis_url, broker=broker)
        with pytest.raises(TypeError, match="Broker"):
            Client(broker=asyncq_redis_url)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="connection options"):
            Client(broker=broker, connection=ConnectionOptions())
    finally:
        await broker.close()


class TickClock:
    """A clock that moves 1 ms each time it is read: time passes between any two reads."""

    def __init__(self) -> None:
        self.ms = FakeClock().now_ms()

    def now_ms(self) -> int:
        self.ms += 1
        return self.ms


@pytest.mark.parametrize("ahead_ms", [1, 2, 3, 50])
async def test_reported_state_is_the_stored_state_when_time_passes(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, ahead_ms: int
) -> None:
    clock = TickClock()
    async with Client(asyncq_redis_url, clock=clock) as client:
        await client.enqueue("warm-up", queue=asyncq_queue)  # registers the queue
        infos = [await client.enqueue("t", queue=asyncq_queue,
                                      process_at=dt(clock.ms + ahead_ms))]
        batch = await client.enqueue_many([Task("t", queue=asyncq_queue,
                                                process_at=dt(clock.ms + ahead_ms))])
        infos.append(_ok(batch[0]))
    qk = K.queue_keys(asyncq_queue)
    for info in infos:
        fields = await task_hash(redis_client, asyncq_queue, info.id)
        assert fields["state"].decode() == info.state.value
        if info.state is TaskState.SCHEDULED:
            assert await redis_client.zscore(qk.scheduled, info.id) == ms(
                info.next_process_at)  # type: ignore[arg-type]
        else:
            assert info.id in await lmembers(redis_client, qk.pending)


async def test_client_from_url_closes_its_connection(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str
) -> None:
    client = Client(asyncq_redis_url)
    await client.enqueue("t", queue=asyncq_queue)
    broker = client.broker
    assert isinstance(broker, RedisBroker)
    conn_id = await broker.redis.client_id()
    await client.close()

    async def connection_gone() -> bool:
        return all(int(c["id"]) != conn_id for c in await redis_client.client_list())

    await eventually(connection_gone)  # the server notices the close asynchronously


async def test_client_rejects_bad_connections() -> None:
    with pytest.raises(ValueError, match="unsupported Redis URL"):
        Client("http://localhost:6379")
    decoded = Redis(decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses"):
            Client(decoded)
    finally:
        await decoded.aclose()
    with pytest.raises(TypeError):
        Client(42)  # type: ignore[arg-type]


async def test_payload_encodings_are_stored_raw(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    cases: list[tuple[Any, bytes, str]] = [
        (b"\x00\xff raw", b"\x00\xff raw", "b"),
        (bytearray(b"ba"), b"ba", "b"),
        (None, b"", "n"),
        ({"a": [1, 2.5, None, True]}, b'{"a":[1,2.5,null,true]}', "j"),
        ("text", b'"text"', "j"),
        (9007199254740993, b"9007199254740993", "j"),  # > 2**53: exact, not a float
    ]
    for payload, stored, enc in cases:
        info = await client.enqueue("t", payload, queue=asyncq_queue)
        fields = await task_hash(redis_client, asyncq_queue, info.id)
        assert fields["payload"] == stored
        assert msg_doc(fields)["enc"] == enc
        assert info.payload == stored
        assert info.encoding == enc


async def test_cancel_publishes_the_task_id(client: Client) -> None:
    broker = client.broker
    assert isinstance(broker, RedisBroker)
    events = broker.listen([K.CANCEL_CHANNEL])
    try:
        assert await next_event(events) is None  # subscribed
        await client.cancel("task-123")
        assert await next_event(events) == (K.CANCEL_CHANNEL, "task-123")
    finally:
        await events.aclose()

"""Uniqueness locks and headers of enqueued tasks (items 55-57)."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest
from client_helpers import (
    HOUR_MS,
)
from redis.asyncio import Redis

from asyncq import (
    Client,
    DuplicateTaskError,
    FakeClock,
    Task,
    TaskState,
)
from asyncq._broker import _keys as K
from tests.helpers.dataplane import (
    dt,
    lmembers,
    msg_doc,
    task_hash,
    zmembers,
)

pytestmark = pytest.mark.anyio


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



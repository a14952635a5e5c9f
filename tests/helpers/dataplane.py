"""Small readers of raw Redis state, shared by the core data-plane tests.

The tests assert what asyncq wrote to Redis, not just what it returned, so these helpers read
task hashes, lists and sorted sets back in a convenient (decoded) form.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio
import orjson
from redis.asyncio import Redis

from asyncq._broker import _keys as K
from asyncq.testing import wait_until
from tests.helpers.ports import free_port

T = TypeVar("T")


async def task_hash(redis: Redis, queue: str, task_id: str) -> dict[str, bytes]:
    """The task hash with field names decoded (values stay bytes); {} when absent."""
    raw = await redis.hgetall(K.queue_keys(queue).task(task_id))
    return {k.decode(): v for k, v in raw.items()}


def msg_doc(fields: dict[str, bytes]) -> dict[str, Any]:
    """The JSON metadata document stored in a task hash's ``msg`` field."""
    doc = orjson.loads(fields["msg"])
    assert isinstance(doc, dict)
    return doc


async def zmembers(redis: Redis, key: str) -> dict[str, int]:
    """A sorted set as {member: integer score}."""
    pairs = await redis.zrange(key, 0, -1, withscores=True)
    return {m.decode(): int(s) for m, s in pairs}


async def lmembers(redis: Redis, key: str) -> list[str]:
    """A list, head first."""
    return [m.decode() for m in await redis.lrange(key, 0, -1)]


async def smembers(redis: Redis, key: str) -> set[str]:
    return {m.decode() for m in await redis.smembers(key)}


async def queue_key_names(redis: Redis, queue: str) -> set[str]:
    """Every key of one queue (SCAN, never KEYS)."""
    base = K.queue_keys(queue).base
    return {k.decode() async for k in redis.scan_iter(match=base + "*", count=1000)}


def ms(when: datetime) -> int:
    """An aware datetime as Unix milliseconds (the unit asyncq stores)."""
    return round(when.timestamp() * 1000)


def dt(ms_value: int) -> datetime:
    """Unix milliseconds as an aware UTC datetime."""
    return datetime.fromtimestamp(ms_value / 1000, tz=UTC)


def dead_redis_url() -> str:
    """URL of a local port nobody listens on (connections are refused at once)."""
    return f"redis://127.0.0.1:{free_port()}/0"


async def next_event(events: AsyncIterator[T], timeout: float = 5.0) -> T:
    """The next item of a ``broker.listen()`` stream; fails (never hangs) if none arrives."""
    with anyio.fail_after(timeout):
        return await anext(events)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    """Poll an async ``check`` until it is true; fail after ``timeout`` seconds."""
    await wait_until(check, timeout=timeout, message="condition")


async def only_completion_mark(redis: Redis, queue: str, task_id: str) -> bool:
    """Whether a task that succeeded returning nothing left only its completion mark: no task
    hash, no lease, and its id in the queue's completion marks."""
    qk = K.queue_keys(queue)
    return (await task_hash(redis, queue, task_id) == {}
            and await redis.zscore(qk.lease, task_id) is None
            and await redis.zscore(qk.marks, task_id) is not None)

"""Shared by the broker tests: a RedisBroker and a Client on one FakeClock, so every stored
time is known to the millisecond and time-based behaviour is tested by moving the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from redis.asyncio import Redis

from asyncq import Client, FakeClock
from asyncq._broker import Broker, NewTask, Outcome, RedisBroker, UniqueLock
from asyncq._broker._connection import make_broker
from asyncq._model._events import TaskEvent
from asyncq._model._message import TaskMessage

OWNER = "srv-a"
OTHER = "srv-b"
LEASE_MS = 30_000
WAITER_TTL_MS = 30_000  # long enough that a loaded machine never lets the flag lapse
DAY_MS = 86_400_000
INT64_MAX = 9223372036854775807


@pytest.fixture
async def broker(asyncq_redis_url: str, clock: FakeClock,
                 anyio_backend: object) -> AsyncIterator[RedisBroker]:
    b = make_broker(asyncq_redis_url, clock=clock)
    try:
        yield b
    finally:
        await b.close()


@pytest.fixture
def client(broker: RedisBroker, clock: FakeClock) -> Client:
    return Client(broker, clock=clock)  # shares the broker: never closed on its own


async def enqueue(client: Client, queue: str, payload: object = None, **opts: Any) -> str:
    info = await client.enqueue("t", payload, queue=queue, **opts)
    return info.id


async def lease(broker: Broker, client: Client, queue: str, n: int = 1,
                owner: str = OWNER, **opts: Any) -> list[str]:
    """Enqueue ``n`` tasks and lease them all to ``owner``; returns their ids, oldest first."""
    ids = [await enqueue(client, queue, f"p{i}".encode(), **opts) for i in range(n)]
    raws, dropped = await broker.dequeue(queue, n, owner, LEASE_MS, WAITER_TTL_MS)
    assert [r.id for r in raws] == ids
    assert dropped == 0
    return ids


async def finish1(broker: Broker, outcome: Outcome, owner: str = OWNER) -> bool:
    [result] = await broker.finish([outcome], owner)
    assert isinstance(result, bool)
    return result


def new_task(queue: str, task_id: str, now: int, *, payload: bytes = b"x",
             process_at_ms: int = 0, unique: UniqueLock | None = None,
             unique_ttl_ms: int = 0) -> NewTask:
    msg = TaskMessage(id=task_id, type="t", queue=queue, enqueued_at_ms=now)
    return NewTask(msg, payload, process_at_ms, unique, unique_ttl_ms)


async def assert_daily_counter(redis: Redis, key: str, value: int, first_at_ms: int) -> None:
    """The daily counter holds ``value`` and expires 90 days after its first increment."""
    assert await redis.get(key) == str(value).encode()
    assert await redis.pexpiretime(key) == first_at_ms + 90 * DAY_MS


async def add_group_tasks(client: Client, clock: FakeClock, queue: str, group: str, n: int,
                          step: float = 1.0, **opts: Any) -> dict[str, int]:
    """Add ``n`` tasks to a group, ``step`` seconds apart; returns {id: group score}."""
    out = {}
    for i in range(n):
        if i:
            clock.advance(step)
        info = await client.enqueue("t", f"g{i}".encode(), queue=queue, group=group, **opts)
        out[info.id] = clock.now_ms()
    return out


@asynccontextmanager
async def listening(broker: Broker, queue: str) -> AsyncIterator[AsyncIterator[Any]]:
    """The queue's events, subscribed and flagged (any layout)."""
    events = broker.listen_events([queue])
    await asyncio.wait_for(anext(events), 5)  # the EventFlush: subscribed
    await broker.set_listening([queue], 10_000)
    try:
        yield events
    finally:
        await events.aclose()  # type: ignore[attr-defined]


async def take(events: AsyncIterator[Any], n: int) -> list[TaskEvent]:
    return [await asyncio.wait_for(anext(events), 5) for _ in range(n)]


def moves(events: list[TaskEvent]) -> list[tuple[str, str | None, str]]:
    return [(e.id, e.previous.value if e.previous else None, e.state.value) for e in events]


@asynccontextmanager
async def hearing(it: AsyncIterator[Any]) -> AsyncIterator[AsyncIterator[Any]]:
    """A listener (hand-offs, signals) once it says it is subscribed; closed after."""
    assert await asyncio.wait_for(anext(it), 5) is None  # subscribed
    try:
        yield it
    finally:
        await it.aclose()  # type: ignore[attr-defined]

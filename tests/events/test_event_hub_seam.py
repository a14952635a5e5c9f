"""The event hub works from what the broker yields (a flush once subscribed, then decoded
TaskEvents), so any Broker feeds it; it owns its one listener task, which ``close`` ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from asyncq import TaskEvent, TaskState
from asyncq._broker import EventFlush
from asyncq._client._event_hub import EventHub

pytestmark = pytest.mark.anyio


class EventsOnly:
    """The part of a Broker the hub uses, with events pushed by the test."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[TaskEvent] = asyncio.Queue()
        self.listening: list[tuple[str, ...]] = []
        self.flushed: list[str] = []

    async def listen_events(self, queues: Sequence[str]) -> AsyncIterator[TaskEvent | EventFlush]:
        async def flush(queue: str) -> None:
            self.flushed.append(queue)

        yield flush
        while True:
            yield await self.events.get()

    async def set_listening(self, queues: Sequence[str], ttl_ms: int) -> None:
        self.listening.append(tuple(queues))


async def test_the_hub_dispatches_the_typed_events_of_any_broker() -> None:
    broker = EventsOnly()
    hub = EventHub(broker)  # type: ignore[arg-type]
    await hub.watch(["q"])
    assert broker.listening == [("q",)]
    waiter = hub.waiter("q", "t1")
    event = TaskEvent(id="t1", queue="q", type="t", previous=TaskState.ACTIVE,
                      state=TaskState.COMPLETED, at=datetime.now(UTC))
    broker.events.put_nowait(event)
    assert await asyncio.wait_for(waiter, 5) == event
    assert hub.recent("q", "t1") == event
    await hub.settle("q")
    assert broker.flushed == ["q"]

    listener: Any = hub._task
    await hub.close()
    assert listener.done() and hub._task is None

"""Aids for in-process workers (built by the ``asyncq_worker`` fixture): a mux whose tasks
block until released, and a gate holding a worker's dequeues."""

from __future__ import annotations

import asyncio
from typing import Any

from asyncq import ServeMux, Task


def blocking_mux(started: list[str], release: asyncio.Event,
                 cancelled: list[str] | None = None) -> ServeMux:
    """A mux whose "block" handler reports it started, then waits for ``release`` (noting in
    ``cancelled`` when it is cancelled instead); "quick" reports it started and returns."""
    mux = ServeMux()

    @mux.handler("block")
    async def block(task: Task) -> None:
        assert task.id is not None
        started.append(task.id)
        try:
            await release.wait()
        except asyncio.CancelledError:
            if cancelled is not None:
                cancelled.append(task.id)
            raise

    @mux.handler("quick")
    async def quick(task: Task) -> None:
        assert task.id is not None
        started.append(task.id)

    return mux


def gate_dequeues(broker: Any) -> asyncio.Event:
    """Hold every dequeue of ``broker`` until the returned event is set: from then on only a
    one-hop hand-off can bring a task to that worker."""
    gate = asyncio.Event()
    real = broker.dequeue

    async def gated(*args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await real(*args, **kwargs)

    broker.dequeue = gated
    return gate

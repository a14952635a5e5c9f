"""Shared by the background-component tests: workers that are never run, whose components
the tests drive one iteration at a time (``tick()``) under a fake clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from asyncq import FakeClock, ServeMux, Worker

DEAD_OWNER = "dead-worker"
MakeWorker = Callable[..., Worker]


@pytest.fixture
async def make_worker(asyncq_redis_url: str, clock: FakeClock) -> AsyncIterator[MakeWorker]:
    """Workers that are never run: tests call their components' tick() under the fake clock."""
    made: list[Worker] = []

    def make(**options: Any) -> Worker:
        worker = Worker(asyncq_redis_url, ServeMux(), clock=clock, **options)
        made.append(worker)
        return worker

    yield make
    for worker in made:
        await worker.broker.close()


async def lease_to_dead_worker(worker: Worker, queue: str, count: int = 1,
                               lease_ms: int = 1000) -> list[str]:
    """Lease tasks to a worker that will never renew or finish them."""
    raws, _ = await worker.broker.dequeue(queue, count, DEAD_OWNER, lease_ms, 1000)
    assert len(raws) == count
    return [raw.id for raw in raws]



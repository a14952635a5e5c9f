"""Shared by the background-component tests: workers that are never run, whose components
the tests drive one iteration at a time (``tick()``) under a fake clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from asyncq import FakeClock, ServeMux, Worker
from asyncq.testing import WorkerFactory

DEAD_OWNER = "dead-worker"
MakeWorker = Callable[..., Worker]


@pytest.fixture
def make_worker(asyncq_worker: WorkerFactory, clock: FakeClock) -> MakeWorker:
    """Workers that are never run (``asyncq_worker.build``): tests call their components'
    tick() under the fake clock."""
    def make(**options: Any) -> Worker:
        return asyncq_worker.build(ServeMux(), clock=clock, **options)

    return make


async def lease_to_dead_worker(worker: Worker, queue: str, count: int = 1,
                               lease_ms: int = 1000) -> list[str]:
    """Lease tasks to a worker that will never renew or finish them."""
    raws, _ = await worker.broker.dequeue(queue, count, DEAD_OWNER, lease_ms, 1000)
    assert len(raws) == count
    return [raw.id for raw in raws]



"""The health check reports whether Redis answers."""

from __future__ import annotations

from collections import Counter

import pytest
from component_helpers import (
    MakeWorker,
)

from asyncq import BrokerError, Client, ServeMux, Task, Worker
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import dead_redis_url

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- health check


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_health_check_reports_none_when_redis_answers(
    kind: str, make_worker: MakeWorker, asyncq_queue: str,
) -> None:
    seen: list[BaseException | None] = []

    def sync_cb(err: BaseException | None) -> None:
        seen.append(err)

    async def async_cb(err: BaseException | None) -> None:
        seen.append(err)

    worker = make_worker(queues={asyncq_queue: 1},
                         health_check=sync_cb if kind == "sync" else async_cb)
    assert worker.healthchecker is not None
    await worker.healthchecker.tick()
    assert seen == [None]


async def test_health_check_reports_the_error_when_redis_is_down() -> None:
    seen: list[BaseException | None] = []
    worker = Worker(dead_redis_url(), ServeMux(), health_check=seen.append)
    assert worker.healthchecker is not None
    await worker.healthchecker.tick()
    await worker.broker.close()
    assert len(seen) == 1 and isinstance(seen[0], BrokerError)


async def test_running_worker_calls_the_health_check_periodically(
    asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    seen: list[BaseException | None] = []
    async with asyncq_worker(ServeMux(), queues={asyncq_queue: 1}, health_check=seen.append,
                             health_check_interval=0.05):
        await wait_until(lambda: len(seen) >= 2, timeout=30)
    assert set(seen) == {None}


async def test_immediate_retries_are_forwarded_without_waiting_for_the_interval(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    runs: Counter[str] = Counter()
    mux = ServeMux()

    @mux.handler("flaky")
    async def flaky(task: Task) -> None:
        assert task.id is not None
        runs[task.id] += 1
        if task.retried < 2:
            raise RuntimeError("fails twice")

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, forward_interval=30,
                             concurrency=4, retry_delay=lambda n, e, t: 0) as w:
        for _ in range(20):
            await asyncq_client.enqueue("flaky", queue=asyncq_queue)
        await w.wait_drained(include_scheduled=True, timeout=20)
    assert len(runs) == 20 and set(runs.values()) == {3}

"""The queue exporter reports a queue's concurrency limit, the slots in use and the tasks
waiting for one, and nothing for a queue without a concurrency limit."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

import asyncq
from asyncq.metrics import queue_metrics_app
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.prom import Key, key, samples

pytestmark = pytest.mark.anyio


async def scrape(app: Any) -> dict[Key, float]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://metrics") as http:
        response = await http.get("/metrics")
    assert response.status_code == 200
    return samples(response.text)


async def test_a_scrape_reports_the_cap_its_use_and_its_waiters(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
    asyncq_redis_url: str,
) -> None:
    capped, free = asyncq_queue, f"{asyncq_queue}-free"
    go = asyncio.Event()
    running = 0

    async def hold(task: asyncq.Task) -> None:
        nonlocal running
        running += 1
        await go.wait()

    await asyncq_client.enqueue("t", queue=free)
    app = queue_metrics_app(asyncq_redis_url)
    try:
        async with asyncq.Inspector(asyncq_redis_url) as inspector:
            await inspector.set_queue_concurrency(capped, 2)
        await asyncq_client.enqueue_many(asyncq.Task("t", queue=capped) for _ in range(5))
        async with asyncq_worker(hold, queues={capped: 1}, concurrency=10) as w:

            async def settled() -> dict[Key, float]:
                app.exporter.expire()
                m = await scrape(app)
                done = m.get(key("asyncq_queue_concurrency_waiting", queue=capped)) == 3
                return m if done else {}

            m = await wait_until(settled, timeout=10, message="3 waiting for the cap")
            assert running == 2
            go.set()
            await w.wait_drained(include_scheduled=True, timeout=10)
    finally:
        await app.aclose()
    assert m[key("asyncq_queue_concurrency_limit", queue=capped)] == 2
    assert m[key("asyncq_queue_concurrency_in_use", queue=capped)] == 2
    assert not any(k[0].startswith("asyncq_queue_concurrency") and dict(k[1])["queue"] == free
                   for k in m)

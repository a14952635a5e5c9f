"""The queue exporter counts tasks archived unrun because they expired:
``asyncq_tasks_expired_total{queue}``, apart from the runs that failed."""

from __future__ import annotations

import httpx
import pytest

from asyncq import Client, FakeClock
from asyncq._broker._connection import make_broker
from asyncq.metrics import queue_metrics_app
from tests.helpers.prom import key, samples

pytestmark = pytest.mark.anyio


async def test_expired_tasks_are_counted_per_queue(asyncq_redis_url: str,
                                                   asyncq_queue: str) -> None:
    clock = FakeClock()
    broker = make_broker(asyncq_redis_url, clock=clock)
    try:
        client = Client(broker, clock=clock)
        for _ in range(3):
            await client.enqueue("t", queue=asyncq_queue, expires_in=1)
        await client.enqueue("t", queue=asyncq_queue)
        clock.advance(2)
        raws, _ = await broker.dequeue(asyncq_queue, 4, "owner", 30_000, 1000)
        assert len(raws) == 1
    finally:
        await broker.close()
    app = queue_metrics_app(asyncq_redis_url)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://metrics") as http:
            m = samples((await http.get("/metrics")).text)
    finally:
        await app.aclose()
    assert m[key("asyncq_tasks_expired_total", queue=asyncq_queue)] == 3
    assert m[key("asyncq_tasks_failed_total", queue=asyncq_queue)] == 0

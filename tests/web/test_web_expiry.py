"""The dashboard's task page shows a task's expiry (when it must have started by), and an
expired task's reason."""

from __future__ import annotations

import re

import pytest

from asyncq import Client, FakeClock
from asyncq._broker._connection import make_broker
from tests.web.web_helpers import WebFactory

pytestmark = pytest.mark.anyio


async def test_the_task_page_shows_the_expiry_and_the_reason_it_expired(
        web: WebFactory, asyncq_client: Client, asyncq_redis_url: str,
        asyncq_queue: str) -> None:
    waiting = await asyncq_client.enqueue("push", queue=asyncq_queue, expires_in=3600)
    plain = await asyncq_client.enqueue("push", queue=asyncq_queue)
    clock = FakeClock()
    broker = make_broker(asyncq_redis_url, clock=clock)
    try:
        gone = await Client(broker, clock=clock).enqueue("push", queue="x" + asyncq_queue,
                                                          expires_in=1)
        clock.advance(2)
        await broker.dequeue("x" + asyncq_queue, 1, "owner", 30_000, 1000)
    finally:
        await broker.close()
    assert waiting.expires_at is not None
    async with web() as http:
        page = (await http.get("/task", params={"q": asyncq_queue, "id": waiting.id})).text
        none = (await http.get("/task", params={"q": asyncq_queue, "id": plain.id})).text
        archived = (await http.get("/task", params={"q": "x" + asyncq_queue,
                                                    "id": gone.id})).text
    cell = re.search(r'<th>expires</th><td data-time="expires">([^<]*)</td>', page)
    assert cell is not None, page
    assert cell.group(1).startswith(waiting.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC (in "))
    assert 'data-time="expires"' not in none
    assert "expired: not started by its expiry at " in archived

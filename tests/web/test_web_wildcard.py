"""The dashboard's servers page shows a worker's queue patterns and the queues each matches."""

from __future__ import annotations

import html

import pytest

from asyncq import Client, ServeMux, Task
from asyncq.testing import WorkerFactory, wait_until
from tests.web.web_helpers import WebFactory

pytestmark = pytest.mark.anyio


async def test_the_servers_page_shows_a_pattern_and_its_queues(
    web: WebFactory, asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    mux = ServeMux()

    @mux.handler("t")
    async def t(task: Task) -> None:
        return None

    pattern, tenants = f"{asyncq_queue}:*", [f"{asyncq_queue}:{n}" for n in "ab"]
    for queue in tenants:
        await asyncq_client.enqueue("t", queue=queue)
    async with asyncq_worker(mux, queues={pattern: 1, "other": 2}) as w, web() as http:
        await w.wait_drained(*tenants)

        async def page() -> str | None:
            text = html.unescape((await http.get("/workers")).text)
            return text if w.worker.config.server_id in text else None

        text = await wait_until(page, message="the worker on the servers page")
    assert f"{pattern}</span>=1 <span class=\"pattern\"" in text
    assert "(pattern, 2 queues: " in text
    for queue in tenants:
        assert f'href="/queue?q={queue.replace(":", "%3A")}">{queue}</a>' in text

"""The overview's list of queues: sorted by any column (ties by name), searched by name,
paged; odd query values fall back to the defaults; the live document of a page of queues
holds those queues only."""

from __future__ import annotations

import re
from typing import Any

import pytest

from asyncq import Client, Inspector, Task
from tests.web.web_helpers import WebFactory

pytestmark = pytest.mark.anyio


def _listed(html: str) -> list[str]:
    return re.findall(r'<tr data-queue="([^"]+)"', html)


async def test_sort_search_and_page(web: WebFactory, asyncq_client: Client,
                                    asyncq_inspector: Inspector, asyncq_fresh_redis: str) -> None:
    for queue, pending in (("b-mail", 3), ("a-report", 1), ("c-mail", 2)):
        for _ in range(pending):
            await asyncq_client.enqueue("t", None, queue=queue)
    await asyncq_inspector.pause("a-report")
    async with web() as http:
        async def listed(**params: str) -> list[str]:
            page = await http.get("/", params=params)
            assert page.status_code == 200
            return _listed(page.text)

        assert await listed() == ["a-report", "b-mail", "c-mail"]
        assert await listed(sort="pending") == ["b-mail", "c-mail", "a-report"]
        assert await listed(sort="pending", order="asc") == ["a-report", "c-mail", "b-mail"]
        assert await listed(sort="paused") == ["a-report", "b-mail", "c-mail"]
        assert await listed(sort="queue", order="desc") == ["c-mail", "b-mail", "a-report"]
        assert await listed(search="MAIL") == ["b-mail", "c-mail"]
        assert await listed(search="nothing") == []
        # unknown column, order or page: the defaults, the last page
        assert await listed(sort="__class__", order="up", page="x") == [
            "a-report", "b-mail", "c-mail"]
        assert await listed(page="99") == ["a-report", "b-mail", "c-mail"]
        live = (await http.get("/live", params=[("qs", "b-mail"), ("qs", "c-mail")])).json()
        every = (await http.get("/live")).json()
    assert set(live["queues"]) == {"b-mail", "c-mail"} and live["all"] is False
    assert set(every["queues"]) == {"a-report", "b-mail", "c-mail"} and every["all"] is True


async def test_the_overview_reads_many_queues_in_a_few_round_trips(
        asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str) -> None:
    """The overview's first load at a fleet of queues: its charts (a week of counters and the
    last hour of every queue) come in pipelines, not a few round trips per queue (8 000 reads
    one after the other took 2-5 s at 2 000 queues)."""
    from asyncq.web._state import Dashboard, Settings

    names = [f"{asyncq_queue}-{i:03d}" for i in range(300)]
    await asyncq_client.enqueue_many([Task("t", None, queue=q) for q in names])
    dash = Dashboard(asyncq_redis_url, Settings(read_only=True, title="t"))
    try:
        await dash.inspector.queues()  # (connected)
        runner: Any = dash.inspector.broker.runner  # type: ignore[attr-defined]
        trips = 0

        def counted(call: Any) -> Any:
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                nonlocal trips
                trips += 1
                return await call(*args, **kwargs)
            return wrapper

        for name in ("command", "commands", "run", "run_many"):
            setattr(runner, name, counted(getattr(runner, name)))
        daily, _ = await dash.chart_stats(names, 7)
    finally:
        await dash.close()
        async with Inspector(asyncq_redis_url) as inspector:  # (other tests list the queues)
            for q in names:
                await inspector.delete_queue(q, force=True)
    assert len(daily) == 7 * len(names)
    assert trips <= 6, trips  # (sampling, then each read in pipelines of up to 1 000)

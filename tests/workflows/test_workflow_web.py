"""The dashboard's workflows page: the newest workflows, one workflow's steps and states."""

from __future__ import annotations

import pytest
import redis.asyncio

from asyncq import Client, Task, chain, group
from asyncq.web import create_app
from tests.web.web_helpers import XSS, web_http

pytestmark = pytest.mark.anyio


async def test_workflows_page_lists_and_shows_steps(
        wf_redis: redis.asyncio.Redis, asyncq_fresh_redis: str, asyncq_client: Client) -> None:
    flow = await asyncq_client.enqueue_workflow(
        chain(group(Task("wf:noop"), Task("wf:noop", queue="other")), Task(XSS)))
    async with web_http(create_app(asyncq_fresh_redis)) as http:
        listing = await http.get("/workflows")
        assert listing.status_code == 200
        assert flow.id in listing.text and "running" in listing.text
        page = await http.get("/workflows", params={"id": flow.id})
        assert page.status_code == 200
        assert "waiting" in page.text and "join" in page.text
        assert f"/task?q=other&amp;id={flow.id}.1" in page.text
        assert XSS not in page.text  # escaped
        missing = await http.get("/workflows", params={"id": "wf-nope"})
        assert missing.status_code == 404

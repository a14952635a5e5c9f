"""The dashboard mounted under a path of another app (or behind a proxy's root_path) links and
redirects within that path; live updates arrive over server-sent events as tasks change."""

from __future__ import annotations

import re

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from asyncq import Client, Inspector
from asyncq.web import create_app
from asyncq.web._format import human_bytes
from tests.web.web_helpers import post_action, serve, web_http

pytestmark = pytest.mark.anyio


async def _home(request: object) -> PlainTextResponse:
    return PlainTextResponse("the host app")


async def test_mounted_under_a_path_every_link_and_redirect_stays_under_it(
        asyncq_redis_url: str, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    info = await asyncq_client.enqueue("t", None, queue=asyncq_queue, process_in=3600)
    dashboard = create_app(asyncq_redis_url)
    host = Starlette(routes=[Route("/", _home), Mount("/admin/queues", app=dashboard)])
    host.state.dashboard = dashboard.state.dashboard  # web_http closes it
    async with web_http(host) as http:
        assert (await http.get("/")).text == "the host app"
        overview = await http.get("/admin/queues/")
        links = re.findall(r'\s(?:href|src|action)="([^"]+)"', overview.text)
        assert links and all(link.startswith("/admin/queues/") for link in links), links
        assert 'data-events="/admin/queues/events?"' in overview.text
        queue_link = next(link for link in links if f"q={asyncq_queue}" in link)
        queue_page = await http.get(queue_link.replace("&amp;", "&"))
        assert queue_page.status_code == 200 and asyncq_queue in queue_page.text
        for link in re.findall(r'\s(?:href|src)="([^"]+)"', queue_page.text):
            followed = await http.get(link.replace("&amp;", "&"))
            assert followed.status_code in (200, 303), link
        done = await post_action(http, f"/admin/queues/task?q={asyncq_queue}&id={info.id}",
                                 "/admin/queues/action/task", action="archive",
                                 queue=asyncq_queue, id=info.id)
        assert done.headers["location"].startswith("/admin/queues/task?")
        assert [c.path for c in http.cookies.jar] == ["/admin/queues/"]
    assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).state.value == "archived"


async def test_behind_a_proxy_links_carry_the_root_path(asyncq_redis_url: str) -> None:
    app = create_app(asyncq_redis_url)
    transport = httpx.ASGITransport(app=app, root_path="/proxied")
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            page = await http.get("/proxied/workers")
    finally:
        await app.state.dashboard.close()
    assert page.status_code == 200
    assert 'href="/proxied/static/app.css' in page.text and 'href="/proxied/"' in page.text


async def test_live_counts_arrive_over_server_sent_events(
        asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str) -> None:
    await asyncq_client.enqueue("t", None, queue=asyncq_queue)
    with serve(create_app(asyncq_redis_url)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http, http.stream(
                "GET", "/events", params={"q": asyncq_queue, "active": "1"}) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            docs = _documents(stream)
            first = await anext(docs)
            assert first["queues"][asyncq_queue]["pending"] == 1
            assert first["queues"][asyncq_queue]["memory"] != human_bytes(0)  # estimated
            assert "no active task" in first["active_html"]
            await asyncq_client.enqueue("t", None, queue=asyncq_queue)
            second = await anext(docs)
            assert second["queues"][asyncq_queue]["pending"] == 2
            # the memory estimate, the costly part of a snapshot, is reused between updates
            assert second["queues"][asyncq_queue]["memory"] == first["queues"][asyncq_queue][
                "memory"]


async def test_the_first_live_document_is_read_after_subscribing(
        asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str) -> None:
    """A change between the page's render (which fills the shared snapshot) and the event
    stream's subscription shows in the stream's first document, not at the idle refresh."""
    await asyncq_client.enqueue("t", None, queue=asyncq_queue)
    with serve(create_app(asyncq_redis_url)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            assert (await http.get("/")).status_code == 200  # snapshot: 1 pending
            await asyncq_client.enqueue("t", None, queue=asyncq_queue)  # heard by nobody
            async with http.stream("GET", "/events", params={"q": asyncq_queue}) as stream:
                first = await anext(_documents(stream))
    assert first["queues"][asyncq_queue]["pending"] == 2


async def _documents(stream: httpx.Response):  # type: ignore[no-untyped-def]
    async for line in stream.aiter_lines():
        if line.startswith("data: "):
            yield orjson.loads(line[6:])

"""Fixtures of the dashboard tests: the app on a real Redis, reached through httpx (in-process)
or through a real uvicorn server on a free loopback port (server-sent events, the browser)."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.types import ASGIApp

from asyncq.web import create_app

XSS = "<script>alert(1)</script>"

WebFactory = Callable[..., Any]


@asynccontextmanager
async def web_client(app: Any, base_url: str = "http://dash.test") -> AsyncIterator[
        httpx.AsyncClient]:
    """An httpx client talking to ``app`` in-process; closes the app's connection after."""
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
            yield client
    finally:
        dashboard = getattr(app.state, "dashboard", None)
        if dashboard is not None:
            await dashboard.close()


@pytest.fixture
def web(asyncq_redis_url: str) -> WebFactory:
    """``async with web(**create_app_options) as http:`` an httpx client on a fresh app."""
    def make(**options: Any) -> Any:
        return web_client(create_app(asyncq_redis_url, **options))
    return make


def csrf_token(page: httpx.Response, client: httpx.AsyncClient) -> str:
    """The token the page's forms carry (and its cookie holds)."""
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match, "no CSRF field on the page"
    assert client.cookies.get("asyncq_csrf") == match.group(1)
    return match.group(1)


async def post_action(client: httpx.AsyncClient, page_path: str, action_path: str,
                      **fields: str) -> httpx.Response:
    """Open ``page_path`` (for its token), then post ``fields`` as its form would."""
    page = await client.get(page_path)
    data = {"csrf": csrf_token(page, client), "next": page_path, **fields}
    return await client.post(action_path, data=data)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve(app: ASGIApp) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread of its own; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                            lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=asyncio.run, args=(server.serve(),), daemon=True)
    thread.start()
    try:
        for _ in range(1000):
            if server.started:
                break
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            threading.Event().wait(0.01)
        else:
            raise TimeoutError("uvicorn did not start within 10 s")
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(10)

"""Helpers of the dashboard tests: an httpx client on the app in-process, its forms' CSRF
token, the app under a real uvicorn server, ``asyncq web`` as a process, screenshots (to
.run/screenshots/, test artifacts). The fixtures are in conftest.py."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp

from tests.helpers.polling import answers, poll_until
from tests.helpers.ports import free_port
from tests.helpers.processes import ROOT

XSS = "<script>alert(1)</script>"
SHOTS = Path(__file__).resolve().parents[2] / ".run" / "screenshots"

WebFactory = Callable[..., Any]


@asynccontextmanager
async def web_http(app: Any, base_url: str = "http://localhost") -> AsyncIterator[
        httpx.AsyncClient]:
    """An httpx client talking to ``app`` in-process; closes the app's connection after."""
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
            yield http
    finally:
        dashboard = getattr(app.state, "dashboard", None)
        if dashboard is not None:
            await dashboard.close()


def csrf_token(page: httpx.Response, http: httpx.AsyncClient) -> str:
    """The token the page's forms carry (and its cookie holds)."""
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match, "no CSRF field on the page"
    assert http.cookies.get("asyncq_csrf") == match.group(1)
    return match.group(1)


async def post_action(http: httpx.AsyncClient, page_path: str, action_path: str,
                      **fields: str) -> httpx.Response:
    """Open ``page_path`` (for its token), then post ``fields`` as its form would."""
    page = await http.get(page_path)
    data = {"csrf": csrf_token(page, http), "next": page_path, **fields}
    return await http.post(action_path, data=data)


@contextmanager
def serve(app: ASGIApp) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread of its own; yields its base URL."""
    # Shutting down waits for open connections (a page's event stream ends once the browser
    # has left it); 5 s leaves room for a loaded machine, and a stream that never ends still
    # fails the test (uvicorn then leaves its socket unclosed, which the test reports).
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                            lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=asyncio.run, args=(server.serve(),), daemon=True)
    thread.start()
    try:
        def started() -> bool:
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            return bool(server.started)

        poll_until(started, timeout=30, message="uvicorn did not start", interval=0.01)
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def web_process(redis_url: str, log: Path, *args: str) -> Iterator[str]:
    """``python -m asyncq web`` (with ``args``) on a free loopback port; yields its base URL
    once it answers."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "asyncq", "web", "--redis-url", redis_url,
                                 "--port", str(port), *args], cwd=ROOT, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, f"asyncq web exited: {log.read_text()}"
        return answers(lambda: httpx.get(f"{url}/static/app.css", timeout=1),
                       (httpx.TransportError,))

    try:
        poll_until(up, timeout=30, message=lambda: f"asyncq web not up: {log.read_text()}")
        yield url
    finally:
        proc.terminate()
        proc.wait(15)


def shot(page: Any, name: str) -> None:
    """Save a screenshot of the whole page as a test artifact."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

"""One event loop in a daemon thread per process, holding the backend's asyncq Client, so
sync views (any thread) and async views (any loop) share one connection pool; a forked child
starts its own loop and client on first use instead of touching its parent's."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from asyncq._client._client import Client

_T = TypeVar("_T")


class LoopBridge:
    """Runs coroutines that use one ``Client`` on a loop of its own, from sync or async code."""

    def __init__(self, make_client: Callable[[], Client]) -> None:
        self._make_client = make_client
        self._lock = threading.Lock()
        self._pid = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Client | None = None

    def _ready(self) -> tuple[asyncio.AbstractEventLoop, Client]:
        with self._lock:
            if self._pid != os.getpid() or self._loop is None or self._client is None:
                # First use, or a fork: the parent's thread does not exist in this process.
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                threading.Thread(target=run, name="asyncq-django-loop", daemon=True).start()
                started.wait()
                self._client = asyncio.run_coroutine_threadsafe(
                    self._build(), loop).result()
                self._loop, self._pid = loop, os.getpid()
            return self._loop, self._client

    async def _build(self) -> Client:
        return self._make_client()

    def _submit(self, call: Callable[[Client], Coroutine[Any, Any, _T]]) -> Future[_T]:
        loop, client = self._ready()
        return asyncio.run_coroutine_threadsafe(call(client), loop)

    def run(self, call: Callable[[Client], Coroutine[Any, Any, _T]]) -> _T:
        """``call(client)`` run to its end from sync code (any thread but the bridge's)."""
        return self._submit(call).result()

    def arun(self, call: Callable[[Client], Coroutine[Any, Any, _T]]) -> Awaitable[_T]:
        """``call(client)`` awaited from any event loop."""
        return asyncio.wrap_future(self._submit(call))

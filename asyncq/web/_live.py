"""Live updates: ``/events`` streams server-sent events, one JSON document of queue counts
(and the active list of a queue page, with each run's progress bar) each time task events say
something changed, at most ``MAX_RATE`` a second per tab and at least every ``IDLE_REFRESH``
seconds; ``/live`` answers the same document once, for browsers whose event stream fails
(they poll it slowly). A task page (``task=<id>``) hears only its task's events and gets its
state and progress bar instead of counts. An overview that lists a page of the queues
(``qs=<queue>`` repeated) hears and gets only those.

Counts come from the dashboard's shared snapshot cache, so Redis sees a bounded number of
reads whatever the number of open tabs; the events themselves arrive on the one subscription
the dashboard's Client holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .._broker import QueueInfo
from .._errors import AsyncqError, QueueNotFoundError, TaskNotFoundError
from .._model._events import EventsLost, TaskEvent
from .._model._info import STORED_STATES
from . import _format
from ._render import base_path, dashboard, render_fragment
from ._state import Dashboard

#: Most updates a second sent to one tab.
MAX_RATE = 2.0
#: Seconds after which an update is sent even when no event came (servers, new queues).
IDLE_REFRESH = 10.0
#: Active tasks shown in a live list.
ACTIVE_ROWS = 25


def counts(info: QueueInfo) -> dict[str, Any]:
    doc: dict[str, Any] = {s.value: getattr(info, s.value) for s in STORED_STATES}
    doc.update(size=info.size, processed=info.processed, failed=info.failed,
               error_rate=_format.error_rate(info.processed, info.failed),
               latency=_format.human_duration(info.latency), paused=info.paused,
               memory=_format.human_bytes(info.memory_usage),
               concurrency_in_use=info.concurrency_in_use,
               concurrency_waiting=info.concurrency_waiting)
    return doc


async def snapshot(dash: Dashboard, queue: str | None, active: bool, base: str,
                   since: float | None = None, task: str | None = None,
                   queues: list[str] | None = None) -> dict[str, Any]:
    """The live document: counts per queue (of ``queues`` when given, of every queue when
    ``queue`` is None, read after ``since``, see ``Dashboard.queue_infos``), and the rendered
    rows of the active list; for a task page, the task's state and progress cell instead.
    ``all`` says the counts cover every queue (the overview's throughput is their sum)."""
    await dash.sample_minutes()  # (once a minute: the last hour of every queue, see there)
    if queue is not None and task is not None:
        return await task_snapshot(dash, queue, task)
    wanted = [queue] if queue is not None else queues
    infos = await dash.queue_infos(wanted, since=since)
    doc: dict[str, Any] = {"queues": {q: counts(i) for q, i in infos.items()},
                           "all": wanted is None}
    if queue is not None and active:
        try:
            tasks = await dash.inspector.list_tasks(queue, "active", 1, ACTIVE_ROWS)
        except QueueNotFoundError:
            tasks = []
        doc["active_html"] = render_fragment("_active_rows.html",
                                             {"tasks": tasks, "base": base})
    return doc


async def task_snapshot(dash: Dashboard, queue: str, task_id: str) -> dict[str, Any]:
    """A task page's live document: its state and its rendered progress cell."""
    try:
        info = await dash.inspector.task_info(queue, task_id)
    except (TaskNotFoundError, QueueNotFoundError):
        return {"queues": {}, "task_state": "deleted"}
    doc: dict[str, Any] = {"queues": {}, "task_state": info.state.value,
                           # (always: a run requeued since shows its old bar no longer)
                           "progress_html": render_fragment("_progress_cell.html",
                                                            {"task": info})}
    if info.progress is not None:
        doc["task_progress"] = info.progress
    return doc


def to_json(doc: dict[str, Any]) -> bytes:
    """JSON with every ``<`` written ``\\u003c`` (it only occurs inside strings): a queue name
    or a task type can never read as markup, whoever parses the document."""
    return orjson.dumps(doc).replace(b"<", b"\\u003c")


def _params(request: Request) -> tuple[str | None, bool, str | None, list[str] | None]:
    listed = [q for q in request.query_params.getlist("qs") if q]
    return (request.query_params.get("q") or None, request.query_params.get("active") == "1",
            request.query_params.get("task") or None, listed or None)


async def live(request: Request) -> Response:
    queue, active, task, listed = _params(request)
    try:
        doc = await snapshot(dashboard(request), queue, active, base_path(request), task=task,
                             queues=listed)
    except AsyncqError as exc:
        return JSONResponse({"error": str(exc)}, 503)
    return Response(to_json(doc), media_type="application/json",
                    headers={"Cache-Control": "no-store"})


async def events(request: Request) -> Response:
    queue, active, task, listed = _params(request)
    dash = dashboard(request)
    queues = [queue] if queue else listed or await dash.inspector.queues()
    return StreamingResponse(_stream(request, dash, queues, queue, active,
                                     task if queue else None, listed),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def _disconnected(request: Request) -> None:
    """Returns when the browser goes away (closed tab, navigation): the stream ends then,
    not at its next write."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@contextlib.asynccontextmanager
async def _no_events() -> AsyncIterator[AsyncIterator[object]]:
    """A stream of task events that never yields one."""
    async def never() -> AsyncIterator[object]:
        await asyncio.Event().wait()
        yield None  # pragma: no cover - never reached

    yield never()


async def _stream(request: Request, dash: Dashboard, queues: list[str], queue: str | None,
                  active: bool, task: str | None = None,
                  listed: list[str] | None = None) -> AsyncIterator[bytes]:
    base = base_path(request)
    changed = asyncio.Event()
    changed.set()  # the first document goes out at once
    # No queue yet (a fresh Redis): nothing to subscribe to, the idle refresh shows new ones.
    events = (dash.client.events(queues, task_ids=None if task is None else [task])
              if queues else _no_events())
    async with events as stream:
        # Each document is read after the last change heard (the first: after subscribing),
        # never from a shared snapshot older than it: a change between that snapshot and the
        # event would otherwise show only at the next idle refresh.
        heard = time.monotonic()

        async def pump() -> None:
            nonlocal heard
            async for item in stream:
                if isinstance(item, TaskEvent | EventsLost):
                    heard = time.monotonic()
                    changed.set()

        pumping = asyncio.create_task(pump())
        gone = asyncio.create_task(_disconnected(request))
        try:
            yield b"retry: 3000\n\n"
            while not gone.done():
                waiting = asyncio.create_task(changed.wait())
                await asyncio.wait([waiting, gone], timeout=IDLE_REFRESH,
                                   return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                if gone.done():
                    return
                changed.clear()
                try:
                    doc = await snapshot(dash, queue, active, base, since=heard, task=task,
                                         queues=listed)
                except AsyncqError as exc:
                    doc = {"error": str(exc)}
                yield b"data: " + to_json(doc) + b"\n\n"
                await asyncio.sleep(1 / MAX_RATE)
        finally:
            for helper in (pumping, gone):
                helper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await helper

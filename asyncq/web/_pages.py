"""The pages (GET only, nothing changes): overview, queue (a tab per state), task, workers,
scheduler entries, groups. Every read goes through the public Inspector API."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .._broker import QueueInfo, TaskMatches
from .._errors import AsyncqError, BrokerError, QueueNotFoundError, TaskNotFoundError
from .._log import get_logger
from .._model._info import STORED_STATES, TaskInfo, TaskState
from .._validate import is_queue_pattern, match_queue_patterns
from . import _format
from ._render import dashboard, link, render

PAGE_SIZE = 25
#: Seconds after which the "Redis unreachable" page reloads itself.
RETRY_AFTER = 5
HISTORY_DAYS = 7
#: Scheduler events shown under each scheduler entry.
ENTRY_HISTORY = 8

STATES = tuple(s.value for s in STORED_STATES)
RUNNABLE = frozenset({"scheduled", "retry", "archived", "completed", "aggregating"})
ARCHIVABLE = frozenset({"pending", "scheduled", "retry", "completed", "aggregating"})
DELETABLE = frozenset(STATES) - {"active"}


def moved_to(path: str) -> Callable[[Request], Awaitable[Response]]:
    """A retired page address: a permanent redirect to ``path`` under the same mount, with the
    query kept (kept for one release so that bookmarks and runbooks lead somewhere)."""
    async def redirect(request: Request) -> Response:
        query = request.url.query
        return RedirectResponse(link(request, path) + (f"?{query}" if query else ""), 308)

    return redirect


def _int(request: Request, name: str, default: int) -> int:
    try:
        return max(1, int(request.query_params.get(name, default)))
    except ValueError:
        return default


#: Queues a page of the overview lists: a fleet of thousands stays a page to read.
OVERVIEW_PAGE_SIZE = 50
#: The columns the overview sorts by: name, pause flag, size per state, today's counters...
SORT_COLUMNS = ("queue", "paused", *STATES, "processed", "failed", "error_rate", "latency",
                "memory")


def _sort_key(column: str) -> Callable[[QueueInfo], Any]:
    if column == "queue":
        return lambda i: i.queue
    if column == "error_rate":
        return lambda i: (i.failed / i.processed if i.processed else -1.0, i.failed)
    if column == "memory":
        return lambda i: i.memory_usage
    return lambda i: getattr(i, column)


def _listing(request: Request, infos: list[QueueInfo]) -> dict[str, Any]:
    """The overview's list: the queues whose name contains ``search`` (case-insensitive),
    sorted by ``sort`` (``order`` asc or desc; ties by name), page ``page`` of
    ``OVERVIEW_PAGE_SIZE``."""
    search = request.query_params.get("search", "").strip()
    sort = request.query_params.get("sort", "queue")
    if sort not in SORT_COLUMNS:
        sort = "queue"
    order = request.query_params.get("order", "asc" if sort == "queue" else "desc")
    if order not in ("asc", "desc"):
        order = "asc"
    found = [i for i in infos if search.casefold() in i.queue.casefold()]
    found.sort(key=lambda i: i.queue)
    found.sort(key=_sort_key(sort), reverse=order == "desc")  # stable: ties stay by name
    pages = max(1, math.ceil(len(found) / OVERVIEW_PAGE_SIZE))
    page = min(_int(request, "page", 1), pages)
    first = (page - 1) * OVERVIEW_PAGE_SIZE
    return {"queues": found[first:first + OVERVIEW_PAGE_SIZE], "matching": len(found),
            "search": search, "sort": sort, "order": order, "page": page, "pages": pages,
            "first": first}


async def overview(request: Request) -> Response:
    dash = dashboard(request)
    infos = await dash.queue_infos(fresh=True)
    days, minutes = await dash.chart_stats(list(infos), HISTORY_DAYS)
    totals = {name: sum(getattr(i, name) for i in infos.values())
              for name in ("size", "processed", "failed", "memory_usage", *STATES)}
    listing = _listing(request, list(infos.values()))
    shown = [i.queue for i in listing["queues"]]
    return render(request, "overview.html", {
        "nav": "overview", "count": len(infos), "totals": totals, **listing,
        "states": STATES, "chart": _format.daily_chart(days),
        "hour": _format.hour_chart(minutes, datetime.now(UTC)),
        "redis": await dash.inspector.redis_info(),
        # live: the counts of the queues shown (every queue when they all are)
        "live": {} if len(shown) == len(infos) else {"qs": shown} if shown else None,
    })


async def queue_page(request: Request) -> Response:
    inspector = dashboard(request).inspector
    queue = request.query_params.get("q", "")
    state = request.query_params.get("state", "pending")
    if state not in STATES:
        state = "pending"
    group = request.query_params.get("group") or None
    page = _int(request, "page", 1)
    try:
        info = await inspector.queue_info(queue)
    except QueueNotFoundError as exc:
        return render(request, "error.html", {"nav": "", "message": str(exc)}, 404)
    search_error = None
    task_id = request.query_params.get("id", "").strip()
    if task_id:
        try:
            await inspector.task_info(queue, task_id)
        except (TaskNotFoundError, ValueError, TypeError) as exc:
            search_error = str(exc)
        else:
            return RedirectResponse(link(request, "/task", q=queue, id=task_id), 303)
    groups = await inspector.groups(queue) if state == "aggregating" else []
    tasks: list[TaskInfo] = []
    total = getattr(info, state)
    task_type = request.query_params.get("type", "").strip()
    # not "error": that is the flash message of an action's result, shown in red
    error = request.query_params.get("error_contains", "").strip()
    filtered = bool(task_type or error)
    matches: TaskMatches | None = None
    try:  # where a filtered list resumes its search (0: the first task)
        start = max(0, int(request.query_params.get("from", 0)))
    except ValueError:
        start = 0
    if group:
        total = next((g.size for g in groups if g.group == group), 0)
    if (state != "aggregating" or group) and filtered:
        matches = await inspector.find_tasks(queue, state, task_type=task_type, error=error,
                                             group=group, start=start, limit=PAGE_SIZE)
        tasks = matches.tasks
    elif state != "aggregating" or group:
        tasks = await inspector.list_tasks(queue, state, page, PAGE_SIZE, group)
    row_actions = _bulk_actions(state, group)
    return render(request, "queue.html", {
        "nav": "", "info": info, "state": state, "states": STATES, "tasks": tasks,
        "group": group, "groups": groups, "page": page, "total": total,
        "pages": max(1, math.ceil(total / PAGE_SIZE)), "search_error": search_error,
        "search_id": task_id, "actions": [] if filtered else row_actions,
        "row_actions": row_actions, "filter_type": task_type, "filter_error": error,
        "matches": matches, "start": start,
        "live": {"q": queue, "active": "1" if state == "active" and page == 1 else None},
    })


def _bulk_actions(state: str, group: str | None) -> list[str]:
    if state == "aggregating" and not group:
        return []
    return [name for name, allowed in (("run", RUNNABLE), ("archive", ARCHIVABLE),
                                       ("delete", DELETABLE)) if state in allowed]


def task_actions(task: TaskInfo) -> list[str]:
    """The actions the task's state allows, as the Inspector would accept them."""
    if task.state is TaskState.ACTIVE:
        return ["cancel"]
    waiting = ["cancel"] if task.state.value in _CANCEL_REMOVES else []
    return waiting + [name for name, allowed in (("run", RUNNABLE), ("archive", ARCHIVABLE),
                                                 ("delete", DELETABLE))
                      if task.state.value in allowed]


_CANCEL_REMOVES = frozenset({"pending", "scheduled", "retry", "aggregating"})
"""The states of a task waiting to run, which a cancel removes (as Celery's revoke)."""


async def task_page(request: Request) -> Response:
    inspector = dashboard(request).inspector
    queue = request.query_params.get("q", "")
    task_id = request.query_params.get("id", "")
    try:
        task = await inspector.task_info(queue, task_id)
    except BrokerError:
        raise  # Redis unreachable is no missing task: the 503 page, which reloads itself
    except (AsyncqError, ValueError, TypeError) as exc:
        return render(request, "error.html", {"nav": "", "message": str(exc)}, 404)
    return render(request, "task.html", {
        "nav": "", "task": task, "actions": task_actions(task),
        "payload": _format.show_data(task.payload, task.encoding),
        "result": _format.show_data(task.result, task.result_encoding),
        # live: its progress bar and state follow the task's events
        "live": {"q": task.queue, "task": task.id},
    })


async def workers_page(request: Request) -> Response:
    inspector = dashboard(request).inspector
    servers = await inspector.workers()
    # A worker serving a pattern (tenant:*): the registered queues it matches, read only then.
    matched: dict[str, dict[str, list[str]]] = {}
    if any(is_queue_pattern(q) for s in servers for q in s.queues):
        names = await inspector.queues()
        matched = {s.id: match_queue_patterns(s.queues, names) for s in servers}
    return render(request, "servers.html", {"nav": "workers", "servers": servers,
                                            "matched": matched})


async def scheduler_page(request: Request) -> Response:
    inspector = dashboard(request).inspector
    entries = await inspector.scheduler_entries()
    histories = await asyncio.gather(
        *(inspector.scheduler_history(e.id, 1, ENTRY_HISTORY) for e in entries))
    return render(request, "periodic.html", {
        "nav": "scheduler",
        "entries": [(e, _format.show_data(e.payload, e.encoding), h)
                    for e, h in zip(entries, histories, strict=True)],
    })


async def groups_page(request: Request) -> Response:
    dash = dashboard(request)
    # (only their group counts: no memory estimate, the costliest read at thousands of queues)
    infos = await dash.inspector.queue_infos(memory=False)
    with_groups = [i.queue for i in infos if i.groups]
    found = await asyncio.gather(*(dash.inspector.groups(q) for q in with_groups))
    return render(request, "groups.html", {
        "nav": "groups", "groups": list(zip(with_groups, found, strict=True)),
    })


async def limits_page(request: Request) -> Response:
    """Every rate and concurrency limit per key: its size, what is in use, who waits."""
    uses = await dashboard(request).inspector.limits()
    return render(request, "limits.html", {"nav": "limits", "limits": uses})


async def redis_failed(request: Request, exc: Exception) -> Response:
    """A page whose Redis call failed: 503 (500 when Redis answered with an error) with a page
    saying so, which reloads itself every ``RETRY_AFTER`` seconds; one warning line is logged,
    not a traceback per request."""
    transient = isinstance(exc, BrokerError) and exc.transient
    get_logger("web").warning("dashboard: redis call failed", path=request.url.path,
                              error=str(exc), transient=transient)
    status = 503 if transient else 500
    response = render(request, "unavailable.html", {
        "nav": "", "message": str(exc), "transient": transient, "retry_after": RETRY_AFTER,
    }, status)
    if transient:
        response.headers["Retry-After"] = str(RETRY_AFTER)
    return response

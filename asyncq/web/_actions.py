"""The actions (POST only): run / archive / delete / cancel a task (a delete, or an archive
the archive's limits would make delete its oldest task, after a confirmation page), the same for
every task of a state or for the tasks ticked on a page (after a confirmation page, which says
what an archive will delete from a full archive), pause / unpause a queue. Each is refused
with 403 in read-only mode, from a foreign origin or without the CSRF token, goes through the
Inspector, and redirects back with its outcome (with what the archive limits deleted), or the
Inspector's error, in the query string (shown escaped by the page)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from .._errors import AsyncqError
from .._inspector._inspector import Inspector
from ._pages import STATES
from ._render import base_path, dashboard, link, render
from ._security import CSRF_FIELD, csrf_ok, foreign_origin

_TASK_ACTIONS = ("run", "archive", "delete", "cancel")
_BULK_ACTIONS = ("run", "archive", "delete")
_QUEUE_ACTIONS = ("pause", "unpause")
#: Most tasks one "selected" action takes (a page shows 25).
MAX_SELECTED = 1000


async def _checked_form(request: Request) -> FormData | Response:
    """The posted form, or the refusal: read-only mode, a foreign Origin/Referer, or a
    missing/wrong CSRF token."""
    if dashboard(request).settings.read_only:
        return PlainTextResponse("the dashboard is read-only", 403)
    settings = dashboard(request).settings
    foreign = foreign_origin(request, settings.allowed_origins, settings.allowed_hosts)
    if foreign is not None:
        return PlainTextResponse(
            f"cross-origin request refused: it comes from {foreign}, not from this dashboard's "
            f"host {request.headers.get('host', '?')} (behind a proxy that rewrites Host, "
            f"list the public origin in create_app(allowed_origins=...) or --allowed-origin)",
            403)
    form = await request.form()
    if not csrf_ok(request, form.get(CSRF_FIELD)):
        return PlainTextResponse("CSRF token missing or wrong: reload the page and retry", 403)
    return form


def _field(form: FormData, name: str) -> str:
    value = form.get(name, "")
    return value if isinstance(value, str) else ""


def safe_next(request: Request, target: str) -> str:
    """``target`` when it is a path of this dashboard, else the overview: a form's ``next``
    can never send the browser elsewhere (no open redirect, no ``javascript:`` link)."""
    base = base_path(request)
    parts = urlsplit(target)
    if (parts.scheme or parts.netloc or not parts.path.startswith(f"{base}/")
            or target.startswith("//") or "\\" in target):
        return f"{base}/"
    return target


def back(request: Request, form: FormData, **flash: str) -> RedirectResponse:
    """Redirect to the form's ``next`` page with ``ok=`` or ``error=`` replacing any earlier
    message."""
    parts = urlsplit(safe_next(request, _field(form, "next")))
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("ok", "error")]
    query += list(flash.items())
    return RedirectResponse(f"{parts.path}?{urlencode(query)}", 303)


async def _outcome(request: Request, form: FormData,
                   call: Callable[[], Awaitable[str]]) -> RedirectResponse:
    try:
        message = await call()
    except (AsyncqError, ValueError, TypeError) as exc:
        return back(request, form, error=str(exc))
    return back(request, form, ok=message)


async def task_action(request: Request) -> Response:
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    inspector = dashboard(request).inspector
    action, queue, task_id = (_field(form, n) for n in ("action", "queue", "id"))
    if action in ("delete", "archive") and _field(form, "confirmed") != "1":
        asked = await _confirm_task(request, form, inspector, action, queue, task_id)
        if asked is not None:
            return asked

    async def call() -> str:
        if action not in _TASK_ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        if action == "cancel":
            outcome = await inspector.cancel(task_id, queue=queue)
            if not outcome:
                raise ValueError(outcome.told(task_id))
            return outcome.told(task_id)
        if action == "archive":
            trimmed = await inspector.archive_task(queue, task_id)
            return f"task {task_id}: archive done{_trim_note(trimmed)}"
        operation = {"run": inspector.run_task, "delete": inspector.delete_task}[action]
        await operation(queue, task_id)
        return f"task {task_id}: {action} done"

    return await _outcome(request, form, call)


async def _confirm_task(request: Request, form: FormData, inspector: Inspector, action: str,
                        queue: str, task_id: str) -> Response | None:
    """Deleting one task, or archiving it into a full archive (which deletes the oldest
    archived task), is for good: a page says which task (its type and state) and what goes
    first, whose form posts again with ``confirmed=1``; None when an archive deletes nothing
    (it goes ahead). From the task's own page, a delete's result shows on its queue's list."""
    try:
        overflow = await inspector.archive_overflow(queue, 1) if action == "archive" else 0
        if action == "archive" and not overflow:
            return None
        task = await inspector.task_info(queue, task_id)
        limits = await inspector.archive_limits(queue)
        archived = (await inspector.queue_info(queue)).archived if overflow else 0
    except (AsyncqError, ValueError, TypeError) as exc:
        return back(request, form, error=str(exc))
    following = back_to = safe_next(request, _field(form, "next"))
    if action == "delete" and urlsplit(following).path == f"{base_path(request)}/task":
        following = link(request, "/queue", q=queue, state=task.state.value)
    return render(request, "confirm.html", {
        "nav": "", "action": action, "queue": queue, "state": "", "group": None,
        "count": 1, "selected": [task.id], "task": task, "archived": archived,
        "overflow": overflow, "limits": limits, "next": following, "back_to": back_to,
        "post_to": "/action/task",
    })


async def state_action(request: Request) -> Response:
    """Every task of a state: the first POST shows a confirmation page, whose form posts
    again with ``confirmed=1``."""
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    inspector = dashboard(request).inspector
    action, queue, state = (_field(form, n) for n in ("action", "queue", "state"))
    group = _field(form, "group") or None
    if action in _BULK_ACTIONS and _field(form, "confirmed") != "1":
        return await _confirm(request, form, inspector, queue, state, group)

    async def call() -> str:
        if action not in _BULK_ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        operation = {"run": inspector.run_all, "archive": inspector.archive_all,
                     "delete": inspector.delete_all}[action]
        count = await operation(queue, state, group)
        done = f"{action}: {int(count)} {state} task(s) of queue {queue}"
        return done + _trim_note(getattr(count, "trimmed", 0))

    return await _outcome(request, form, call)


async def _confirm(request: Request, form: FormData, inspector: Inspector, queue: str,
                   state: str, group: str | None) -> Response:
    action = _field(form, "action")
    try:
        info = await inspector.queue_info(queue)
        count = getattr(info, state) if state in STATES else 0
        if group and state == "aggregating":
            count = next((g.size for g in await inspector.groups(queue) if g.group == group), 0)
        overflow = await inspector.archive_overflow(queue, count) if action == "archive" else 0
        limits = await inspector.archive_limits(queue)
    except (AsyncqError, ValueError, TypeError) as exc:
        return back(request, form, error=str(exc))
    return render(request, "confirm.html", {
        "nav": "", "action": action, "queue": queue, "state": state, "group": group,
        "count": count, "archived": info.archived, "overflow": overflow, "selected": None,
        "limits": limits, "next": safe_next(request, _field(form, "next")),
        "post_to": "/action/state",
    })


async def selected_action(request: Request) -> Response:
    """The tasks ticked on a list page: the first POST shows a confirmation page (with what
    an archive would delete from a full archive), whose form posts again with
    ``confirmed=1``; each task then goes through the Inspector in turn, and the result says
    how many were done, which failed and why, and what the archive limits deleted."""
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    inspector = dashboard(request).inspector
    action, queue = _field(form, "action"), _field(form, "queue")
    ids = list(dict.fromkeys(v for v in form.getlist("id") if isinstance(v, str) and v))
    if action not in _BULK_ACTIONS:
        return back(request, form, error=f"unknown action {action!r}")
    if not ids:
        return back(request, form, error="no task selected: tick the tasks first")
    if len(ids) > MAX_SELECTED:
        return back(request, form, error=f"{len(ids)} tasks selected; at most {MAX_SELECTED} "
                                         f"at once (or use the action on every task of a state)")
    if _field(form, "confirmed") != "1":
        try:
            info = await inspector.queue_info(queue)
            overflow = (await inspector.archive_overflow(queue, len(ids))
                        if action == "archive" else 0)
            limits = await inspector.archive_limits(queue)
        except (AsyncqError, ValueError, TypeError) as exc:
            return back(request, form, error=str(exc))
        return render(request, "confirm.html", {
            "nav": "", "action": action, "queue": queue, "state": "", "group": None,
            "count": len(ids), "selected": ids, "archived": info.archived,
            "overflow": overflow, "limits": limits,
            "next": safe_next(request, _field(form, "next")), "post_to": "/action/tasks",
        })
    done, trimmed, failed = 0, 0, []
    for task_id in ids:
        try:
            if action == "archive":
                trimmed += await inspector.archive_task(queue, task_id)
            elif action == "run":
                await inspector.run_task(queue, task_id)
            else:
                await inspector.delete_task(queue, task_id)
            done += 1
        except (AsyncqError, ValueError, TypeError) as exc:
            failed.append(str(exc))
    message = f"{action}: {done} of {len(ids)} selected task(s) of queue {queue}"
    if failed:
        shown = "; ".join(failed[:3]) + (f"; and {len(failed) - 3} more" if len(failed) > 3
                                          else "")
        message += f"; {len(failed)} failed: {shown}"
    message += _trim_note(trimmed)
    return back(request, form, **({"ok": message} if done else {"error": message}))


def _trim_note(trimmed: int) -> str:
    """What an archive deleted to stay within the archive's limits, said in its result."""
    if not trimmed:
        return ""
    return f"; the archive limits deleted the {trimmed} oldest archived task(s)"


async def queue_action(request: Request) -> Response:
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    inspector = dashboard(request).inspector
    action, queue = _field(form, "action"), _field(form, "queue")

    async def call() -> str:
        if action not in _QUEUE_ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        changed = await (inspector.pause if action == "pause" else inspector.unpause)(queue)
        done = "paused" if action == "pause" else "unpaused"
        return f"queue {queue} {done}" if changed else f"queue {queue} was already {done}"

    return await _outcome(request, form, call)

"""The limit actions (POST only): set or clear a queue's concurrency limit (queue page), set or
clear an operator's value over a declared rate or concurrency limit (limits page). Checked like
every action (read-only mode, origin, CSRF token); the first POST shows a confirmation page
saying what changes and what it does to running and waiting tasks, whose form posts again with
``confirmed=1``; the change goes through the Inspector and the page it came from shows the
result (or the error)."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from .._errors import AsyncqError
from .._inspector._inspector import Inspector
from .._limits import ConcurrencyLimit, Limit, LimitUse, RateLimit
from .._limits._spec import check_size
from ._actions import _checked_form, _field, _outcome, back, safe_next
from ._render import dashboard, render

_LIMIT_ACTIONS = ("set_cap", "clear_cap", "set_limit", "clear_limit")
_KINDS = ("concurrency", "rate")
#: The form fields a limit action carries (posted again by its confirmation page).
_FIELDS = ("action", "queue", "concurrency", "kind", "name", "rate")


def size_text(kind: str, n: int | None, period_ms: int | None = 0) -> str:
    """``at most 3 at once``, ``100 starts per 1 s``, or ``no limit``."""
    if n is None:
        return "no limit"
    if kind == "rate":
        return f"{n} starts per {(period_ms or 0) / 1000:g} s"
    return f"at most {n} at once"


def _count(form: FormData) -> int:
    text = _field(form, "concurrency").strip()
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"the concurrency must be a whole number of tasks, got {text!r}") \
            from None


def _new_limit(form: FormData) -> Limit:
    """The value a ``set_limit`` form gives the limit it names."""
    kind, name = _field(form, "kind"), _field(form, "name")
    if kind not in _KINDS:
        raise ValueError(f"unknown limit kind {kind!r}")
    if kind == "rate":
        return RateLimit(_field(form, "rate").strip(), name=name)
    return ConcurrencyLimit(_count(form), name=name)


async def _current(inspector: Inspector, queue: str, kind: str, name: str) -> LimitUse | None:
    return next((u for u in await inspector.limits(queue)
                 if u.kind == kind and u.name == name), None)


async def _plan(inspector: Inspector, form: FormData) -> tuple[str, str]:
    """What the action will do, and what that means for running and waiting tasks (for the
    confirmation page); raises ValueError/TypeError for a value that would be refused."""
    action, queue = _field(form, "action"), _field(form, "queue")
    if action in ("set_cap", "clear_cap"):
        current = await inspector.queue_concurrency(queue)
        now = size_text("queue", current.limit if current else None)
        running = (f"{current.in_use} running, {current.waiting} waiting for a slot"
                   if current
                   else "no limit: its running tasks are not counted")
        if action == "clear_cap":
            return (f"Clear the concurrency limit of queue {queue} (now {now})?",
                    f"Every waiting task starts as workers are free ({running}).")
        n = check_size(_count(form), "a queue's concurrency limit")
        return (f"Limit queue {queue} to {n} task(s) at once across every worker (now {now})?",
                f"It applies to the next start, without restarting any worker; a lower limit "
                f"stops nothing that runs, a higher one starts waiting tasks at once "
                f"({running}).")
    kind, name = _field(form, "kind"), _field(form, "name")
    use = await _current(inspector, queue, kind, name)
    now = size_text(kind, use.limit, use.period_ms) if use else "nothing known"
    declared = (size_text(kind, use.declared, use.declared_period_ms)
                if use and use.declared is not None else "nothing declared yet")
    if action == "clear_limit":
        return (f"Clear the value set for the {kind} limit {name!r} of queue {queue} "
                f"(now {now})?", f"What the handlers declare applies again: {declared}.")
    limit = _new_limit(form)
    new = size_text(kind, limit.n, getattr(limit, "period_ms", 0))
    return (f"Set the {kind} limit {name!r} of queue {queue} to {new} (now {now})?",
            f"It replaces what the handlers declare ({declared}) for every key, from the "
            f"next start, until it is cleared.")


async def limit_action(request: Request) -> Response:
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    inspector = dashboard(request).inspector
    action, queue = _field(form, "action"), _field(form, "queue")
    if action not in _LIMIT_ACTIONS:
        return back(request, form, error=f"unknown action {action!r}")
    if _field(form, "confirmed") != "1":
        try:
            question, note = await _plan(inspector, form)
        except (AsyncqError, ValueError, TypeError) as exc:
            return back(request, form, error=str(exc))
        return render(request, "confirm_limit.html", {
            "nav": "", "question": question, "note": note,
            "fields": {f: _field(form, f) for f in _FIELDS if _field(form, f)},
            "next": safe_next(request, _field(form, "next")),
        })

    async def call() -> str:
        if action in ("set_cap", "clear_cap"):
            before = await inspector.queue_concurrency(queue)
            if action == "set_cap":
                started = await inspector.set_queue_concurrency(queue, _count(form))
            else:
                started = await inspector.clear_queue_concurrency(queue)
            current = await inspector.queue_concurrency(queue)
            done = (f"queue {queue}: concurrency limit {size_text('queue', current.limit)}"
                    if current
                    else f"queue {queue}: no concurrency limit")
            was = size_text("queue", before.limit) if before else "no limit"
            return done + f" (was {was})" + _started(started)
        kind, name = _field(form, "kind"), _field(form, "name")
        if action == "set_limit":
            started = await inspector.set_limit(queue, _new_limit(form))
        else:
            started = await inspector.clear_limit(queue, kind, name)
        use = await _current(inspector, queue, kind, name)
        if use is None:
            return f"{kind} limit {name!r} of queue {queue}: no value left" + _started(started)
        who = "set by an operator" if use.runtime else "as the handlers declare it"
        return (f"{kind} limit {name!r} of queue {queue}: "
                f"{size_text(kind, use.limit, use.period_ms)}, {who}" + _started(started))

    return await _outcome(request, form, call)


def _started(n: int) -> str:
    return f"; {n} waiting task(s) started" if n else ""

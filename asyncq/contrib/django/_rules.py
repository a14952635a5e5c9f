"""The options a worker registers a Django task with: its definition's, over its backend's
OPTIONS, over Django's defaults (the same whatever door enqueued a call)."""

from __future__ import annotations

from typing import Any

from asyncq._errors import Retry

from ._compat import Task

DJANGO_MAX_RETRY = 3
"""Retries of a Django task whose definition and backend set neither ``max_retry`` nor
``retry_on``: used only by a run its worker lost (killed, or its host gone) and by a task
that raises ``asyncq.Retry``; an exception it raises fails it at once (the framework's
contract). Three, as Celery's ``max_retries``."""

ONLY_ASKED = (Retry,)
"""The ``retry_on`` of such a task: no exception of its own is retried (a lost run and
``asyncq.Retry`` always may be)."""


def rules_of(task: Task[Any, Any]) -> dict[str, Any]:
    """The ``ServeMux.handle`` options of ``task``: its definition's, else its backend's
    OPTIONS (MAX_RETRY, TIMEOUT, RETENTION), else Django's defaults: ``DJANGO_MAX_RETRY``
    with ``ONLY_ASKED`` when no retry option is set anywhere, and the backend's retention
    (a call that returned None is kept as long as one that returned a value)."""
    from ._backend import AsyncqBackend

    backend = task.get_backend()
    options: dict[str, Any] = (dict(backend.rule_defaults)
                               if isinstance(backend, AsyncqBackend) else {})
    defined = task.defined() if hasattr(task, "defined") else {}
    options.update(defined)
    if "max_retry" not in options and "retry_on" not in options:
        options["max_retry"] = DJANGO_MAX_RETRY
        options["retry_on"] = ONLY_ASKED
    options.setdefault("max_retry", DJANGO_MAX_RETRY)
    return options

"""The Tasks framework this Django has: ``django.tasks`` (Django 6) when present, else the
``django-tasks`` backport, so the backend runs on either without the caller choosing."""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django_tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
elif find_spec("django.tasks") is not None:
    from django.tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    FRAMEWORK = "django.tasks"
else:
    if find_spec("django_tasks") is None:
        raise ImportError("asyncq.contrib.django needs Django's Tasks framework: Django >= 6, "
                          "or the django-tasks backport (pip install 'asyncq[django]')")
    from django_tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    FRAMEWORK = "django_tasks"

#: Which framework was found: "django.tasks" or "django_tasks" (the backport).
FRAMEWORK: str


def normalize_json(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples become lists, mapping keys strings), as the
    framework stores arguments and return values."""
    import orjson

    return orjson.loads(orjson.dumps(value))


__all__ = ["DEFAULT_TASK_BACKEND_ALIAS", "FRAMEWORK", "TASK_MAX_PRIORITY", "TASK_MIN_PRIORITY",
           "BaseTaskBackend", "InvalidTaskError",
           "Task", "TaskContext", "TaskError", "TaskResult", "TaskResultDoesNotExist",
           "TaskResultStatus",
           "normalize_json", "task", "task_backends", "task_enqueued", "task_finished",
           "task_started"]

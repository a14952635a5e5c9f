"""asyncq as the queue of Django's Tasks framework (``django.tasks``, or the ``django-tasks``
backport): ``AsyncqBackend`` enqueues and reads results; its tasks (``AsyncqTask``) take
asyncq's options where they are defined and per call; ``manage.py asyncq_worker`` (with
"asyncq.contrib.django" in INSTALLED_APPS) runs them, and ``register`` / ``TaskMux`` put them
on a ServeMux of your own."""

from ._backend import AsyncqBackend
from ._calls import call, pipe, step
from ._mux import TaskMux, register
from ._rules import DJANGO_MAX_RETRY
from ._task import AsyncqTask, task

__all__ = ["DJANGO_MAX_RETRY", "AsyncqBackend", "AsyncqTask", "TaskMux", "call", "pipe",
           "register", "step", "task"]

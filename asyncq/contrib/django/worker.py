"""What an asyncq worker process of a Django project imports: Django is set up when this
module is imported (from ``DJANGO_SETTINGS_MODULE``), so ``asyncq worker
asyncq.contrib.django.worker:mux`` runs the project's tasks, and a worker that preloads this
module (``--preload asyncq.contrib.django.worker``, as ``manage.py asyncq_worker`` does) sets
Django up once in its fork server rather than in each child process."""

from __future__ import annotations

from typing import Any


def setup_django() -> None:
    """``django.setup()`` unless Django is set up, or being set up (this module imported by
    a module the app registry is importing)."""
    from django.apps import apps

    if not apps.ready and not apps.loading:
        import django

        django.setup()


setup_django()

from asyncq._model._task import Task  # noqa: E402  (Django is set up first)

from ._mux import TaskMux  # noqa: E402
from ._runner import run_isolated  # noqa: E402


def run_in_child(task: Task) -> Any:
    """The handler a child process of the worker's pool imports for a Django task defined
    with ``isolate="process"``: importing this module set Django up."""
    return run_isolated(task)


mux = TaskMux()
"""Runs every Django task of the project whose backend is asyncq's (see ``TaskMux``)."""

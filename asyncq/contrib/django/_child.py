"""What a child process of the worker's pool imports to run a Django task defined with
``isolate="process"``: Django is set up when this module is imported (unless the fork server
did it, having preloaded ``asyncq.contrib.django.worker``)."""

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

from ._runner import run_isolated  # noqa: E402


def run_in_child(task: Task) -> Any:
    """The handler of a process-isolated Django task, as the child imports it."""
    return run_isolated(task)

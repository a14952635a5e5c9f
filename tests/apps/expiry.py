"""A ServeMux for the expiry tests' worker processes: ``asyncq worker tests.apps.expiry:mux``.
Each handler leaves a mark file named by the payload's ``mark`` when it runs, so a test sees
from outside the process whether a handler ever ran."""

from __future__ import annotations

from pathlib import Path

from asyncq import ServeMux, Task

mux = ServeMux()


def _mark(task: Task) -> None:
    Path(task.json()["mark"]).write_text(task.id)


@mux.handler("expiry:run")
async def run(task: Task) -> None:
    _mark(task)


@mux.handler("expiry:push", expires_in=0.5)
async def push(task: Task) -> None:
    """Registered with a default expiry: a task of this type not started half a second after
    it was enqueued is archived unrun, however it was enqueued."""
    _mark(task)

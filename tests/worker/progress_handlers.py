"""Handlers the progress tests run in child processes (a child imports this module by name)."""

from __future__ import annotations

import time

from asyncq import Task


def crunch(task: Task) -> int:
    """Report progress from a handler process: chatty (many reports within the child's
    interval), then a last report just before returning."""
    steps = int(task.json()["steps"])
    for i in range(steps):
        task.set_progress_sync(i / steps, f"chunk {i} of {steps}")
    time.sleep(0.1)  # (quiet: the child's timer sends the latest report)
    task.set_progress_sync(1.0, "crunched", data={"steps": steps})
    return steps


def bad_report(task: Task) -> None:
    """A report out of range is the handler's own error, raised in the child."""
    task.set_progress_sync(42)

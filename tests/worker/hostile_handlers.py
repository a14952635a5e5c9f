"""Handlers that misbehave in their child process (the process-pool hostility tests): they
start processes of their own, die, return too much or raise errors JSON cannot carry. A child
imports this module by name, so they live at module level here."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from asyncq import Task


def _grandchild(pid_file: Path, *, ignore_term: bool) -> int:
    """Fork a process that sleeps for ten minutes holding this child's pipe (forked, it
    inherits every descriptor), after writing its pid to ``pid_file``; its pid here."""
    pid = os.fork()
    if pid == 0:
        try:
            if ignore_term:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            pid_file.write_text(str(os.getpid()))
            time.sleep(600)
        finally:
            os._exit(0)
    while not pid_file.exists() or not pid_file.read_text():
        time.sleep(0.01)
    return pid


def fork_and_die(task: Task) -> None:
    """Leave a grandchild that holds the pipe, then die without answering."""
    _grandchild(Path(task.json()), ignore_term=False)
    os._exit(3)


def fork_and_spin(task: Task) -> None:
    """Leave a grandchild that ignores SIGTERM, then spin until killed."""
    _grandchild(Path(task.json()), ignore_term=True)
    while True:
        pass


def fork_and_return(task: Task) -> str:
    """Leave a grandchild running in the background and succeed."""
    _grandchild(Path(task.json()), ignore_term=False)
    return "left one behind"


def big(task: Task) -> bytes:
    """A result of the payload's number of bytes."""
    return b"x" * task.json()


def big_json(task: Task) -> list[str]:
    """A JSON result of about the payload's number of bytes."""
    return ["y" * 1000] * (task.json() // 1003)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def lone_surrogate(task: Task) -> None:
    raise LookupError("bad key \ud800 here")


def unprintable(task: Task) -> None:
    raise Unprintable("hidden")


def pid(task: Task) -> int:
    return os.getpid()

"""Worker targets of the CLI tests: what ``asyncq worker`` must refuse (a typed task, web
apps, a function of the wrong arity) and what it builds a worker from (a WorkerConfig for
``--config``, a factory returning a configured Worker)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from asyncq import ServeMux, Task, Worker, WorkerConfig

mux = ServeMux()
#: (task type, error) of every failure the error handler was told of, in this process
ERRORS: list[list[str]] = []


@mux.task("targets:send_email")
async def send_email(to: str) -> None:
    """A typed task: a task definition, not a handler."""


api = FastAPI()  # the web app of the same service (ASGI)


def create_api() -> FastAPI:
    """An app factory, as FastAPI projects often have."""
    return FastAPI()


def wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """A WSGI application."""
    start_response("200 OK", [])
    return [b"ok"]


def two_arguments(task: Task, other: int) -> None:
    """Not a handler: it takes two arguments."""


@mux.handler("targets:state")
async def state(task: Task) -> object:
    """What the lifespan yielded."""
    return task.state


@mux.handler("targets:flaky")
async def flaky(task: Task) -> object:
    """Fails its first run; with the config's retry_delay the retry comes at once."""
    if task.retried == 0:
        raise RuntimeError("first run fails")
    return {"retried": task.retried, "errors": ERRORS}


@mux.handler("targets:combined")
async def combined(task: Task) -> object:
    """The task the group aggregator made of a group's tasks."""
    return task.json()


def _report(task: Task, error: BaseException) -> None:
    ERRORS.append([task.type, str(error)])


def _retry_soon(retried: int, error: BaseException, task: Task) -> float:
    return 0.05


def _combine(group: str, tasks: list[Task]) -> Task:
    return Task("targets:combined", sorted(t.json() for t in tasks), queue=tasks[0].queue,
                task_id=f"combined-{group}", retention=60)


@asynccontextmanager
async def _lifespan() -> AsyncIterator[object]:
    yield {"from": "lifespan", "pid": os.getpid()}


def make_config() -> WorkerConfig:
    """``--config tests.apps.targets:make_config``: every callable setting, and plain ones
    the command's flags override."""
    return WorkerConfig(concurrency=3, lifespan=_lifespan, error_handler=_report,
                        retry_delay=_retry_soon, group_aggregator=_combine,
                        group_grace_period=60)


def make_worker() -> Worker:
    """A factory target returning a configured Worker on $ASYNCQ_REDIS_URL."""
    config = make_config()
    return Worker(os.environ["ASYNCQ_REDIS_URL"], mux, config=config)

"""The loops of background components that talk to Redis: one round at a time, forever.

``run_periodically`` is the run loop of the forwarder, recoverer, janitor and aggregator: call
``tick``, book the outcome on the component's ``Outage`` (a ``BrokerError`` is an outage; any
other exception is a bug, logged with its traceback; neither stops the loop), then wait.
``try_each`` is how one round covers many queues: a queue that fails does not stop the others.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import NoReturn, TypeVar

import anyio
from structlog.typing import FilteringBoundLogger

from .._errors import BrokerError
from ._outage import Outage

T = TypeVar("T")
R = TypeVar("R")


async def run_periodically(tick: Callable[[], Awaitable[object]],
                           interval: float | Callable[[], float], outage: Outage,
                           log: FilteringBoundLogger, *,
                           wait_first: bool = False,
                           wake: asyncio.Event | None = None) -> NoReturn:
    """Run ``tick`` every ``interval`` seconds until cancelled.

    ``interval`` may be a function, read before each wait (a wait that depends on the last
    round). ``wake`` set during a wait ends it early (whoever sets it clears it, typically in
    ``interval``). ``wait_first`` waits once before the first round.
    """
    if wait_first:
        await _wait(interval, wake)
    while True:
        await run_once(tick, outage, log)
        await _wait(interval, wake)


async def run_once(tick: Callable[[], Awaitable[object]], outage: Outage,
                   log: FilteringBoundLogger) -> bool:
    """One round: True when ``tick`` went through, False when it failed (logged once per
    outage by ``outage``; an unexpected exception also with its traceback)."""
    try:
        await tick()
    except BrokerError as exc:
        outage.failed(exc)
        return False
    except Exception as exc:
        log.exception("round failed unexpectedly", operation=outage.operation)
        outage.failed(exc)
        return False
    outage.succeeded()
    return True


async def _wait(interval: float | Callable[[], float], wake: asyncio.Event | None) -> None:
    seconds = interval() if callable(interval) else interval
    if wake is None:
        await anyio.sleep(seconds)
        return
    with anyio.move_on_after(seconds):
        await wake.wait()


async def try_each(steps: Iterable[Callable[[], Awaitable[R]]]) -> list[R]:
    """Await every step in order and return their results; a step that fails with a
    ``BrokerError`` does not stop the others: the first error is raised once all were tried."""
    results: list[R] = []
    error: BrokerError | None = None
    for step in steps:
        try:
            results.append(await step())
        except BrokerError as exc:
            error = error or exc
    if error is not None:
        raise error
    return results


async def for_each(items: Iterable[T], step: Callable[[T], Awaitable[R]]) -> list[R]:
    """``try_each`` of ``step(item)`` for every item (typically every queue of a worker)."""
    return await try_each(functools.partial(step, item) for item in items)

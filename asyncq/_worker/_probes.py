"""A worker's probes: /livez from the loop watch, /readyz from Redis and the worker's state,
both answered from the probe server's thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from typing import Any

from .._broker import Broker
from .._defaults import HEALTH_PROBE_TIMEOUT
from .._errors import BrokerError
from .._service._health import Answer, LoopWatch, Route, json_answer
from ._running import Running


class WorkerProbes:
    """``live()`` and ``ready()``: a probe's answer for the worker, from any thread.

    ``state()`` is the worker's own word: "starting", "waiting for redis", "ready", "stopped
    fetching" or "stopping"; only "ready" can be ready, and then only if Redis answers a ping
    sent through the worker's event loop (so a blocked loop is not ready either)."""

    def __init__(self, watch: LoopWatch, broker: Broker, stall_timeout: float,
                 state: Callable[[], str]) -> None:
        self._watch = watch
        self._broker = broker
        self._stall_timeout = stall_timeout
        self._state = state
        self.loop: asyncio.AbstractEventLoop | None = None
        """The worker's event loop, once it runs."""

    def routes(self) -> Mapping[str, Route]:
        return {"/livez": self.live, "/readyz": self.ready}

    def live(self) -> Answer:
        """503 once the loop has not turned for stall_timeout."""
        if self.loop is None:
            return json_answer(True, {"status": "starting"})
        blocked_s = self._watch.blocked_s
        blocked = round(blocked_s, 3)
        if blocked_s >= self._stall_timeout:  # (unrounded: as name_stall measures it)
            self._watch.name_stall()  # (logged before the first "stalled" answer)
            return json_answer(False, {"status": "stalled", "blocked_s": blocked,
                                       "stall_timeout_s": self._stall_timeout})
        return json_answer(True, {"status": "ok", "blocked_s": blocked,
                                  "stall_timeout_s": self._stall_timeout})

    def ready(self) -> Answer:
        """200 while the worker fetches tasks and Redis answers through its loop."""
        state = self._state()
        if state != "ready" or self.loop is None:
            return json_answer(False, {"status": state})
        try:
            future = asyncio.run_coroutine_threadsafe(self._broker.ping(), self.loop)
        except RuntimeError:  # the loop closed meanwhile
            return json_answer(False, {"status": "stopping"})
        try:
            future.result(HEALTH_PROBE_TIMEOUT)
        except BrokerError as exc:
            return json_answer(False, {"status": "redis unreachable", "error": str(exc)})
        except concurrent.futures.TimeoutError:
            future.cancel()
            why = ("event loop blocked" if self._watch.blocked_s >= HEALTH_PROBE_TIMEOUT
                   else "redis did not answer")
            return json_answer(False, {"status": why, "timeout_s": HEALTH_PROBE_TIMEOUT})
        except concurrent.futures.CancelledError:
            return json_answer(False, {"status": "stopping"})
        return json_answer(True, {"status": "ok"})


def running_tasks(running: Mapping[str, Running]) -> list[tuple[str, str]]:
    """(type, id) of each running handler."""
    return [(run.task.type, run.id) for run in list(running.values())]


def task_of(running: Mapping[str, Running]) -> Callable[[asyncio.Task[Any]], tuple[str, str]
                                                        | None]:
    """A function naming the handler run by an asyncio task, as (type, id)."""
    def name(atask: asyncio.Task[Any]) -> tuple[str, str] | None:
        for run in list(running.values()):
            if run.atask is atask:
                return run.task.type, run.id
        return None
    return name

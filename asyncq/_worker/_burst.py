"""Burst mode: the worker stops on its own once there is nothing left for it to run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import anyio

from .._broker import Backlog, Broker
from .._clock import Clock
from .._log import get_logger
from ._acker import Acker
from ._config import WorkerConfig


class Runs(Protocol):
    """What burst mode needs of the processor."""

    @property
    def idle(self) -> bool:
        """No task running or prefetched."""

    async def wait_idle(self) -> None:
        """Return once no handler is running."""


CHECK_INTERVAL = 0.2  # seconds between checks while this worker is idle


class BurstWatch:
    """Calls ``on_empty`` (a graceful stop) once this worker runs, holds and writes nothing,
    and no served queue has a pending task or a scheduled/retry task due within
    ``config.burst_horizon`` (nor, with a group aggregator, a group waiting). A paused queue
    counts as empty: this worker could not run its tasks."""

    def __init__(self, broker: Broker, config: WorkerConfig, processor: Runs,
                 acker: Acker, clock: Clock, on_empty: Callable[[], None],
                 queues: Sequence[str] | None = None) -> None:
        self._broker = broker
        self._queues = list(config.queues) if queues is None else queues
        """The worker's queues (its list, grown as its patterns match new queues)."""
        self._config = config
        self._processor = processor
        self._acker = acker
        self._clock = clock
        self._on_empty = on_empty
        self._log = get_logger("worker", server_id=config.server_id)

    async def run(self) -> None:
        while True:
            await self._processor.wait_idle()
            if self._idle() and await self.empty():
                self._log.info("burst mode: no task left to run; stopping")
                self._on_empty()
                return
            await anyio.sleep(min(CHECK_INTERVAL, self._config.idle_poll_interval))

    def _idle(self) -> bool:
        return self._processor.idle and not self._acker.pending

    async def empty(self) -> bool:
        """True when nothing is left to run now or within the horizon (read from Redis, then
        this worker checked idle again: an outcome written meanwhile is seen)."""
        horizon_ms = self._clock.now_ms() + round(self._config.burst_horizon * 1000)
        try:
            backlogs = [await self._broker.maintenance.backlog(queue, horizon_ms)
                        for queue in list(self._queues)]
        except Exception as exc:  # Redis unreachable: certainly not done
            self._log.debug("burst mode: cannot read the queues", error=str(exc))
            return False
        return self._idle() and not any(self._waiting(b) for b in backlogs)

    def _waiting(self, backlog: Backlog) -> bool:
        if backlog.paused:
            return False
        groups = backlog.groups if self._config.group_aggregator is not None else 0
        return bool(backlog.pending or backlog.due or groups)

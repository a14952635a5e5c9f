"""Hand-offs: this worker's end of one-hop delivery — a task an enqueue (or forward, requeue...)
leased to this idle worker directly.

A dequeue that leaves slots free registers the worker as idle on the queue; the script that
makes the next task pending leases it to the longest-idle registered worker and publishes it on
that worker's channel. The subscriber passes each one, decoded by the broker, to
``Handoffs.receive``, which hands the task to the processor (``Processor.handed_off``): it
starts as if dequeued, through the limits gate, and the fetch loop dequeues again at once,
which re-registers the worker and returns any hand-off whose message was lost. At stop,
``leave_idle`` withdraws the registrations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio
from structlog.typing import FilteringBoundLogger

from .._broker import Broker, Handoff, RawTask
from .._clock import Clock
from .._errors import BrokerError
from ._config import WorkerConfig
from ._outcomes import error_text


class Handoffs:
    """Receives hand-offs and passes each task on to ``arrive(queue, raw, lease_until)``;
    withdraws this worker's idle registrations at stop."""

    def __init__(self, broker: Broker, config: WorkerConfig, clock: Clock,
                 log: FilteringBoundLogger, arrive: Callable[[str, RawTask, int], None],
                 queues: Sequence[str] | None = None) -> None:
        self._broker, self._config, self._clock, self._log = broker, config, clock, log
        self._arrive = arrive
        self._queues = list(config.queues) if queues is None else queues
        """The queues this worker may be registered idle on (the worker's list, which grows
        as its patterns match new queues)."""
        self.registered = False
        """A dequeue may have registered this worker as idle (withdrawn at stop)."""

    def receive(self, handoff: Handoff) -> None:
        """Pass on a handed-off task (already leased to this worker; the broker decoded it and
        dropped a malformed message, whose task the next dequeue returns)."""
        queue, raw, until = handoff
        self._arrive(queue, raw, min(until, self._clock.now_ms() + self._config.lease_ms))

    async def leave_idle(self) -> None:
        """Withdraw the idle registrations, so no task is handed off to a stopping worker (one
        that still is gets requeued)."""
        if not self.registered:
            return
        try:
            with anyio.fail_after(1.0):  # Redis down: the registrations lapse on their own
                await self._broker.leave_idle(list(self._queues), self._config.server_id,
                                              self._config.lease_ms)
        except (BrokerError, TimeoutError) as exc:
            self._log.warning("could not leave the idle workers",
                              error=error_text(exc) or "timed out")

"""Handoffs: the tasks an enqueue (or forward, requeue...) leased to this idle worker in one hop.

A dequeue that leaves slots free registers the worker as idle on the queue; the script that
makes the next task pending leases it to the longest-idle registered worker and publishes it on
that worker's channel. The subscriber passes each message here: the task starts as if dequeued
(through the limits gate), and the fetch loop dequeues again at once, which re-registers the
worker and returns any hand-off whose message was lost.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import anyio
from structlog.typing import FilteringBoundLogger

from .._broker import Broker, Handoff, Outcome, RawTask
from .._clock import Clock
from .._errors import BrokerError
from ._config import WorkerConfig
from ._leases import PREFETCHED, Leases
from ._outcomes import error_text

if TYPE_CHECKING:
    from ._processor import Processor


class Handoffs:
    """Receives hand-offs for a processor and withdraws its idle registrations at stop."""

    def __init__(self, processor: Processor, broker: Broker, config: WorkerConfig,
                 leases: Leases, clock: Clock, log: FilteringBoundLogger) -> None:
        self._p = processor
        self._broker, self._config, self._leases = broker, config, leases
        self._clock, self._log = clock, log
        self.registered = False
        """A dequeue may have registered this worker as idle (withdrawn at stop)."""
        self.arriving: set[str] = set()
        """Handed-off tasks whose limits are being claimed (not yet in the leases)."""
        self._admitting: set[asyncio.Task[None]] = set()

    def receive(self, handoff: Handoff) -> None:
        """Start a handed-off task (already leased to this worker), or give it back next in
        line when this worker is stopping or has no free slot."""
        p = self._p
        queue, raw, until = handoff
        if raw.id in self._leases or raw.id in self.arriving:
            return  # a dequeue returned it first
        lease_until = min(until, self._clock.now_ms() + self._config.lease_ms)
        if not p.fetching or p.free_slots() <= 0:
            # Registered on several queues, one hand-off filled the last slot: the requeue
            # hands it to another idle worker.
            self._leases.add(raw.id, queue, lease_until, PREFETCHED)
            p.settle(Outcome("requeue", queue, raw.id))
            return
        if p.limits is not None and p.limits.limits:
            self.arriving.add(raw.id)
            task = asyncio.get_running_loop().create_task(self._admit(queue, raw, lease_until))
            self._admitting.add(task)
            task.add_done_callback(self._admitting.discard)
        else:
            p.take(queue, raw, lease_until)
        p.wake.set()

    async def _admit(self, queue: str, raw: RawTask, lease_until: int) -> None:
        try:
            for admitted in await self._p.admit(queue, [raw], lease_until):
                self._p.take(queue, admitted, lease_until)
        finally:
            self.arriving.discard(raw.id)

    async def leave_idle(self) -> None:
        """Withdraw the idle registrations, so no task is handed off to a stopping worker (one
        that still is gets requeued)."""
        if not self.registered:
            return
        try:
            with anyio.fail_after(1.0):  # Redis down: the registrations lapse on their own
                await self._broker.leave_idle(list(self._config.queues), self._config.server_id,
                                          self._config.lease_ms)
        except (BrokerError, TimeoutError) as exc:
            self._log.warning("could not leave the idle workers",
                          error=error_text(exc) or "timed out")

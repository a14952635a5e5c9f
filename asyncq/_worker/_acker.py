"""Acker: writes task outcomes (done, retry, archive, requeue) back to Redis in pipelined batches.

A finished handler frees its slot at once; its outcome waits here until written. While it waits
the heartbeat keeps the task's lease alive. An outcome is never given up because time passed:
every outcome script checks that the task is still leased to this worker, so an outcome written
late — after an outage longer than the lease — is either still right (nobody took the task over:
it is written, and the task does not run again) or refused (another worker recovered the task:
it is dropped, and the task runs again). Only shutdown bounds the wait (see ``drain``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from .._broker import Broker, Outcome
from .._errors import BrokerError
from .._log import get_logger
from .._outage import Outage
from ._leases import OUTCOME, Leases

_BATCH = 500


@dataclass(slots=True)
class PendingOutcome:
    outcome: Outcome
    unsure: bool = False
    """A write of it failed without an answer: Redis may have applied it (reply lost)."""


class Acker:
    """Collects outcomes and flushes them with one pipelined round trip per batch.

    A submitted outcome's lease is held in ``leases`` as an ``outcome`` lease (the processor
    hands it over); the acker releases it once the outcome is written, refused or lost.
    """

    def __init__(self, broker: Broker, owner: str, leases: Leases,
                 on_retry_written: Callable[[int], None] | None = None,
                 on_written: Callable[[Outcome], None] | None = None) -> None:
        self._broker = broker
        self._on_written = on_written  # the on_state_change notifier
        self._owner = owner
        self._leases = leases
        self._on_retry_written = on_retry_written  # the forwarder's poke(due_ms)
        self._log = get_logger("acker")
        self.outage = Outage(self._log, "write outcomes", base=0.05, cap=2.0)
        self.pending: dict[str, PendingOutcome] = {}
        self._inflight: set[str] = set()
        self._delay = 0.0  # before the next attempt, after a failed flush
        self._wakeup = asyncio.Event()
        self._empty = asyncio.Event()
        self._empty.set()
        self.written = 0
        self.given_up = 0
        """Outcomes dropped because the task was no longer leased to this worker."""
        self.unconfirmed = 0
        """Outcomes dropped after a write without an answer: most likely that write went
        through (its reply was lost), else the task was taken over."""

    def submit(self, outcome: Outcome) -> None:
        """Queue an outcome for writing (never blocks)."""
        self.pending[outcome.task_id] = PendingOutcome(outcome)
        self._empty.clear()
        self._wakeup.set()

    def lease_lost(self, task_id: str) -> None:
        """The heartbeat found the task no longer leased to this worker.

        Either an earlier write of this outcome went through but its reply was lost, or another
        worker recovered the task (it will run again). An outcome being written right now is
        left alone: that write's own reply tells which.
        """
        if task_id in self._inflight:
            return
        entry = self.pending.pop(task_id, None)
        if entry is not None:
            self._leases.release(task_id, OUTCOME)
            self._dropped(entry)
        self._mark_if_empty()

    def _dropped(self, entry: PendingOutcome) -> None:
        outcome = entry.outcome
        if entry.unsure:
            self.unconfirmed += 1
            self._log.info("outcome already applied by an earlier write whose reply was lost "
                           "(or the task was taken over)", task_id=outcome.task_id,
                           queue=outcome.queue, outcome=outcome.kind)
        else:
            self.given_up += 1
            self._log.warning("task no longer leased to this worker; outcome dropped",
                              task_id=outcome.task_id, queue=outcome.queue,
                              outcome=outcome.kind)

    def discard_stale(self, task_id: str) -> None:
        """This worker leased ``task_id`` again: an outcome still waiting for it belongs to an
        earlier run whose lease ran out (the task was recovered since) and must not be written
        over the new run."""
        if task_id in self.pending and task_id not in self._inflight:
            entry = self.pending.pop(task_id)
            self._leases.release(task_id, OUTCOME)
            self.given_up += 1
            self._log.warning("outcome of an earlier run dropped; the task was recovered and "
                              "leased again", task_id=task_id, queue=entry.outcome.queue,
                              outcome=entry.outcome.kind)
            self._mark_if_empty()

    def _mark_if_empty(self) -> None:
        if not self.pending:
            self._empty.set()

    async def flush(self) -> bool:
        """Write one batch; True when everything sent was written (or refused as lost)."""
        batch = list(self.pending.values())[:_BATCH]
        if not batch:
            return True
        self._inflight = {p.outcome.task_id for p in batch}
        try:
            results = await self._broker.finish([p.outcome for p in batch], self._owner)
        except BrokerError as exc:
            for entry in batch:
                entry.unsure = True
            self._delay = self.outage.failed(exc, waiting=len(self.pending))
            return False
        finally:
            self._inflight = set()
        error: Exception | None = None
        for entry, result in zip(batch, results, strict=True):
            task_id = entry.outcome.task_id
            if isinstance(result, Exception):
                error = error or result
                continue
            if self.pending.get(task_id) is entry:  # (not replaced by a newer run's outcome)
                del self.pending[task_id]
                self._leases.release(task_id, OUTCOME)
            if result:
                self.written += 1
                outcome = entry.outcome
                if outcome.kind == "retry" and self._on_retry_written is not None:
                    self._on_retry_written(outcome.retry_at_ms)
                if self._on_written is not None:
                    self._on_written(outcome)
            else:
                self._dropped(entry)
        self._mark_if_empty()
        if error is not None:
            self._delay = self.outage.failed(error, waiting=len(self.pending))
            return False
        self.outage.succeeded()
        return True

    async def run(self) -> None:
        """Flush whenever outcomes are waiting; back off while Redis fails."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                ok = await self.flush()
            except Exception as exc:  # a bug must not stop outcomes from being written
                self._log.exception("unexpected error while writing outcomes")
                self._delay = self.outage.failed(exc)
                ok = False
            if self.pending:
                self._wakeup.set()
            if not ok:
                await anyio.sleep(self._delay)

    async def drain(self, timeout: float) -> bool:
        """Wait until every outcome is written or refused; False on timeout."""
        with anyio.move_on_after(timeout):
            await self._empty.wait()
            return True
        return False

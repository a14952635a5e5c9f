"""Acker: writes task outcomes (done, retry, archive, requeue) back to Redis in pipelined batches.

A finished handler frees its slot at once; its outcome waits here until written. While it waits
the heartbeat keeps the task's lease alive. An outcome is never given up because time passed:
every outcome script checks that the task is still leased to this worker, so an outcome written
late — after an outage longer than the lease — is either still right (nobody took the task over:
it is written, and the task does not run again) or refused (another worker recovered the task:
it is dropped, and the task runs again). Only shutdown bounds the wait (see ``drain``): by the
lease duration, or by a few seconds of failed writes when Redis is unreachable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from .._broker import Broker, Outcome
from .._errors import BrokerError
from .._log import get_logger
from .._service._outage import Outage
from ._leases import OUTCOME, Leases
from ._outcomes import error_text, unstorable_outcome

_BATCH = 500
#: At shutdown, how long writes of outcomes may keep failing (or wait for a reply) without one
#: written before the rest are given up (left to lease recovery): the shutdown stays bounded
#: while Redis is unreachable or frozen.
DRAIN_WHILE_FAILING = 3.0
_DRAIN_CHECK = 0.1  # (how often a shutdown drain looks at the outage)
_UNSTORABLE = object()
"""A flush result: not even the replacement outcome could be written (the lease is dropped)."""


def retryable(exc: BaseException) -> bool:
    """False when writing again fails the same way however often it is tried: Redis answered
    with an error (a script error...) other than being out of memory, busy, read-only or not
    ready, or the call could not even be sent (a value that cannot be encoded). Any other
    BrokerError (the connection failed) is worth retrying."""
    return isinstance(exc, BrokerError) and not exc.refused


@dataclass(slots=True)
class PendingOutcome:
    outcome: Outcome
    unsure: bool = False
    """A write of it failed without an answer: Redis may have applied it (reply lost)."""
    superseded: bool = False
    """The worker took a new run of the task while this was being written: Redis applied it
    (the new run could not start otherwise), so a failed write is not tried again."""


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
        self.unstorable = 0
        """Outcomes Redis refused for good, replaced by ``unstorable_outcome``."""
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
        over the new run; one being written was applied already (``superseded``)."""
        if task_id in self._inflight:
            entry_in_flight = self.pending.get(task_id)
            if entry_in_flight is not None:
                entry_in_flight.superseded = True
        elif task_id in self.pending:
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
        """Write one batch; True when everything sent was written (or refused as lost).

        A batch Redis refuses for good (not an outage: a script error, a value that cannot be
        sent) is written one outcome at a time, and an outcome that still fails is replaced by
        ``unstorable_outcome``: one bad outcome never holds up the others."""
        batch = list(self.pending.values())[:_BATCH]
        if not batch:
            return True
        self._inflight = {p.outcome.task_id for p in batch}
        results: list[Any]
        try:
            try:
                results = await self._broker.finish([p.outcome for p in batch], self._owner)
            except Exception as exc:
                if retryable(exc):
                    for entry in batch:
                        entry.unsure = True
                    self._delay = self.outage.failed(exc, waiting=len(self.pending))
                    return False
                results = await self._one_by_one(batch, exc)
            for i, (entry, result) in enumerate(zip(batch, results, strict=True)):
                if isinstance(result, Exception) and not retryable(result):
                    results[i] = await self._replace(entry, result)
        finally:
            self._inflight = set()
        error: Exception | None = None
        for entry, result in zip(batch, results, strict=True):
            task_id = entry.outcome.task_id
            if isinstance(result, Exception):
                if entry.superseded and self.pending.get(task_id) is entry:
                    del self.pending[task_id]  # (applied: its new run is under way)
                    continue
                error = error or result
                continue
            if self.pending.get(task_id) is entry:  # (not replaced by a newer run's outcome)
                del self.pending[task_id]
                self._leases.release(task_id, OUTCOME)
            if result is _UNSTORABLE:
                continue
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

    async def _write_one(self, outcome: Outcome) -> bool | Exception:
        try:
            return (await self._broker.finish([outcome], self._owner))[0]
        except Exception as exc:
            return exc

    async def _one_by_one(self, batch: list[PendingOutcome],
                          exc: Exception) -> list[Any]:
        if len(batch) == 1:
            return [exc]
        self._log.warning("a batch of outcomes was refused; writing them one by one",
                          count=len(batch), error=error_text(exc))
        return [await self._write_one(entry.outcome) for entry in batch]

    async def _replace(self, entry: PendingOutcome, exc: Exception) -> Any:
        """``entry``'s outcome was refused for good: write ``unstorable_outcome`` instead (it
        replaces the pending outcome, so an outage meanwhile retries the replacement)."""
        original = entry.outcome
        entry.outcome = unstorable_outcome(original, exc)
        self.unstorable += 1
        self._log.error("outcome could not be stored; recording the failure instead",
                        task_id=original.task_id, queue=original.queue, outcome=original.kind,
                        error=error_text(exc))
        result = await self._write_one(entry.outcome)
        if isinstance(result, Exception) and not retryable(result):
            self._log.error("not even the failure could be stored; the task is left to "
                            "lease recovery", task_id=original.task_id, queue=original.queue,
                            error=error_text(result))
            return _UNSTORABLE
        return result

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

    async def drain(self, timeout: float, *, failing_for: float = DRAIN_WHILE_FAILING) -> bool:
        """Wait until every outcome is written or refused; False after ``timeout``, or once
        writes have failed or hung, with no outcome written, for ``failing_for`` seconds (Redis
        unreachable or frozen: waiting longer would only hold up the shutdown; the leases of
        the outcomes left expire and their tasks are recovered)."""
        deadline = anyio.current_time() + timeout
        stuck_since: float | None = None
        written = self.written
        while not self._empty.is_set():
            now = anyio.current_time()
            if self.written != written or not (self.outage.ongoing or self._inflight):
                stuck_since, written = None, self.written
            elif stuck_since is None:
                stuck_since = now
            if now >= deadline or (stuck_since is not None
                                   and now - stuck_since >= failing_for):
                return False
            with anyio.move_on_after(_DRAIN_CHECK):
                await self._empty.wait()
        return True

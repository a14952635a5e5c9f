"""Acker: writes task outcomes (done, retry, archive, requeue) back to Redis in pipelined batches.

A finished handler frees its slot at once; its outcome waits here until written. While it waits
the heartbeat keeps the task's lease alive, so a brief Redis outage never drops an outcome. An
outcome that could not be written before its lease ran out is given up, loudly: the recoverer
will then retry the task (it may run again: at-least-once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from .._backoff import Backoff
from .._broker import Broker, Outcome
from .._clock import Clock
from .._errors import BrokerError
from .._log import get_logger

_BATCH = 500


@dataclass(slots=True)
class PendingOutcome:
    outcome: Outcome
    lease_until_ms: int


class Acker:
    """Collects outcomes and flushes them with one pipelined round trip per batch."""

    def __init__(self, broker: Broker, owner: str, clock: Clock,
                 on_retry_written: Callable[[int], None] | None = None) -> None:
        self._broker = broker
        self._owner = owner
        self._clock = clock
        self._on_retry_written = on_retry_written  # the forwarder's poke(due_ms)
        self._log: Any = get_logger("acker")
        self.pending: dict[str, PendingOutcome] = {}
        self._wakeup = asyncio.Event()
        self._empty = asyncio.Event()
        self._empty.set()
        self.written = 0
        self.given_up = 0

    def submit(self, outcome: Outcome, lease_until_ms: int) -> None:
        """Queue an outcome for writing (never blocks)."""
        self.pending[outcome.task_id] = PendingOutcome(outcome, lease_until_ms)
        self._empty.clear()
        self._wakeup.set()

    def lease_lost(self, task_id: str) -> None:
        """The heartbeat found the lease gone: writing this outcome would be refused anyway."""
        entry = self.pending.pop(task_id, None)
        if entry is not None:
            self.given_up += 1
            self._log.warning("lease lost before outcome was written; task will be retried",
                              task_id=task_id, queue=entry.outcome.queue,
                              outcome=entry.outcome.kind)
        self._mark_if_empty()

    def _mark_if_empty(self) -> None:
        if not self.pending:
            self._empty.set()

    def _expire(self) -> None:
        now = self._clock.now_ms()
        for task_id, entry in list(self.pending.items()):
            if entry.lease_until_ms <= now:
                del self.pending[task_id]
                self.given_up += 1
                self._log.error("outcome not written before the lease expired; the recoverer "
                                "will retry the task", task_id=task_id, queue=entry.outcome.queue,
                                outcome=entry.outcome.kind)

    async def flush(self) -> bool:
        """Write one batch; True when everything sent was written (or refused as lost)."""
        batch = list(self.pending.values())[:_BATCH]
        if not batch:
            return True
        try:
            results = await self._broker.finish([p.outcome for p in batch], self._owner)
        except BrokerError as exc:
            self._log.warning("writing outcomes failed; will retry", error=str(exc),
                              waiting=len(self.pending))
            self._expire()
            self._mark_if_empty()
            return False
        ok = True
        for entry, result in zip(batch, results, strict=True):
            task_id = entry.outcome.task_id
            if isinstance(result, Exception):
                ok = False
                continue
            if self.pending.get(task_id) is entry:
                del self.pending[task_id]
            if result:
                self.written += 1
                outcome = entry.outcome
                if outcome.kind == "retry" and self._on_retry_written is not None:
                    self._on_retry_written(outcome.retry_at_ms)
            else:
                self.given_up += 1
                self._log.warning("task was no longer leased to this worker; outcome dropped",
                                  task_id=task_id, queue=entry.outcome.queue,
                                  outcome=entry.outcome.kind)
        if not ok:
            self._expire()
        self._mark_if_empty()
        return ok

    async def run(self) -> None:
        """Flush whenever outcomes are waiting; back off while Redis fails."""
        backoff = Backoff(base=0.05, cap=2.0)
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                ok = await self.flush()
            except Exception:  # a bug must not stop outcomes from being written
                self._log.exception("unexpected error while writing outcomes")
                ok = False
            if self.pending:
                self._wakeup.set()
            if ok:
                backoff.reset()
            else:
                await anyio.sleep(backoff.next_delay())

    async def drain(self, timeout: float) -> bool:
        """Wait until every outcome is written or given up; False on timeout."""
        with anyio.move_on_after(timeout):
            await self._empty.wait()
            return True
        return False

"""Heartbeat: renews the leases of running tasks and publishes this worker's state with a TTL.

A lease that Redis reports lost (the task was recovered, deleted or taken over) cancels the
handler: the recoverer owns the task from then on. So does a lease that could not be renewed
before it ran out — checked by a local watchdog that never waits on Redis, so a Redis that
hangs (paused, a dead connection waiting for its socket timeout) cannot keep a handler running
past its lease while another worker recovers the task.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any, Protocol

import anyio

from .._broker import CANCEL_REQUESTED, Broker, RunningTaskRecord, WorkerRecord
from .._clock import Clock
from .._errors import BrokerError
from .._log import get_logger
from .._service._outage import Outage
from .._service._stalls import overlapped_stall
from ._acker import Acker
from ._config import WorkerConfig
from ._leases import OUTCOME, Leases
from ._mux import RulesCache
from ._queues import ServedQueues
from ._running import Running, Stop

#: Seconds the last step of shutdown (clearing the server state) may take.
CLEAR_TIMEOUT = 2.0

class Runs(Protocol):
    """What the heartbeat needs of the processor: the runs it reports and stops."""

    @property
    def running(self) -> Mapping[str, Running]:
        """The running handlers, by task id."""

    @property
    def processed(self) -> int:
        """Runs that finished."""

    @property
    def failed(self) -> int:
        """Runs that failed."""

    @property
    def rules(self) -> RulesCache:
        """The task options registered for each task type."""

    def cancel(self, task_id: str, reason: Stop) -> bool:
        """Stop the run of ``task_id`` for ``reason``; False when it is not running here."""

    def lease_lost(self, task_id: str) -> bool:
        """The lease of ``task_id`` was lost: stop its run; False when nothing was left."""


class Heartbeat:
    """Lease keeper and server-state publisher; ``tick()`` is one beat, ``watch()`` one check
    of local lease expiry."""

    def __init__(self, broker: Broker, config: WorkerConfig, leases: Leases,
                 processor: Runs, acker: Acker, clock: Clock,
                 served: ServedQueues | None = None) -> None:
        self._broker = broker
        self._config = config
        self._served = served if served is not None else ServedQueues(config.queues)
        """The queues served: the configured names are registered, the patterns' matches
        published with the state."""
        self._leases = leases
        self._processor = processor
        self._acker = acker
        self._clock = clock
        self._log = get_logger("heartbeat", server_id=config.server_id)
        self.outage = Outage(self._log, "renew leases")
        self.started_ms = clock.now_ms()
        self.status = "active"
        self._published: dict[str, dict[str, Any]] | None = None
        self._host = socket.gethostname()
        self._pid = os.getpid()

    async def tick(self) -> bool:
        """Renew every lease this worker holds, then publish the server state; True if both
        went through."""
        error = await self._renew_leases()
        self.watch()
        try:
            await self.write_state()
            # The queues this worker serves are known queues even before their first task
            # (the broker sends each name once, so this costs nothing after the first tick).
            # A pattern is not a queue, and the queues it matches are registered already.
            await self._broker.register_queues(self._served.exact)
        except BrokerError as exc:
            error = error or exc
        if error is None:
            self.outage.succeeded()
            return True
        self.outage.failed(error)
        return False

    async def renew_now(self) -> None:
        """Renew the leases at once, out of turn (after a pub/sub reconnect: a cancellation
        published meanwhile is seen through its marker); a failure waits for the next beat."""
        await self._renew_leases()

    async def _renew_leases(self) -> BrokerError | None:
        """One renewal per queue of every lease in the table; a lease Redis reports lost is
        reported to its holder (the processor stops the handler, the acker drops the outcome)."""
        error: BrokerError | None = None
        lease_ms = self._config.lease_ms
        for queue, ids in self._leases.by_queue().items():
            sent = self._clock.now_ms()
            try:
                flags = await self._broker.extend_leases(queue, ids, self._config.server_id,
                                                         lease_ms)
            except BrokerError as exc:
                error = exc
                if self._config.metrics is not None and not overlapped_stall(exc):
                    self._config.metrics.lease_renewals_failed(len(ids))
                continue
            for task_id, kept in zip(ids, flags, strict=True):
                lease = self._leases.get(task_id)  # (its holder may have changed meanwhile)
                if lease is None:
                    continue
                if kept:
                    lease.until_ms = sent + lease_ms
                    if kept == CANCEL_REQUESTED and self._processor.cancel(task_id, Stop.CANCEL):
                        self._log.info("task cancelled on request", task_id=task_id,
                                       seen_by="lease renewal")
                else:
                    if self._config.metrics is not None:
                        self._config.metrics.lease_renewals_failed(1)
                    if lease.holder == OUTCOME:
                        self._acker.lease_lost(task_id)
                    else:
                        self._processor.lease_lost(task_id)
        return error

    def watch(self) -> int:
        """Stop the handlers (and drop the prefetched tasks) whose lease ran out because it
        could not be renewed; returns how many.

        Purely local: lease ends are computed from when each renewal was *sent*, so they are
        never later than what Redis holds.
        """
        expired = self._leases.expired(self._clock.now_ms())
        return sum(self._processor.lease_lost(task_id) for task_id in expired)

    def worker_record(self) -> WorkerRecord:
        """This worker's state and the tasks it runs, as the broker publishes them."""
        cfg = self._config
        return WorkerRecord(
            server_id=cfg.server_id, host=self._host, pid=self._pid,
            concurrency=cfg.concurrency, queues=dict(cfg.queues),
            strict_priority=cfg.strict_priority, status=self.status, started_ms=self.started_ms,
            processed=self._processor.processed, failed=self._processor.failed,
            extra=dict(cfg.extra),
            # With patterns in "queues": the queues each one serves now.
            matched=({p: tuple(q) for p, q in self._served.matched.items()}
                     if self._served.dynamic else {}),
            task_options=self._task_options(),
            running=tuple(
                RunningTaskRecord(task_id=run.id, task_type=run.msg.type, queue=run.queue,
                                  started_ms=run.started_ms, deadline_ms=run.deadline_ms,
                                  payload_size=len(run.task.payload))
                for run in self._processor.running.values()))

    def _task_options(self) -> dict[str, dict[str, Any]]:
        """The task options handlers were registered with, by pattern, so the Inspector shows
        the values that apply (registrations are fixed once the worker runs: read once)."""
        if self._published is None:
            self._published = self._processor.rules.published()
        return self._published

    async def write_state(self) -> None:
        ttl = int(self._config.heartbeat_interval * 2000) + 1000
        await self._broker.workers.write(self.worker_record(), ttl)

    async def clear(self) -> None:
        """Remove the server state (last step of shutdown): tried for CLEAR_TIMEOUT at most,
        so an unreachable Redis does not hold up the shutdown (the state expires by itself)."""
        try:
            with anyio.fail_after(CLEAR_TIMEOUT):
                await self._broker.workers.clear(self._config.server_id)
        except (BrokerError, TimeoutError) as exc:
            self._log.warning("clearing server state failed; it expires by itself",
                              error=str(exc) or "timed out")

    async def run(self) -> None:
        """Beat every ``heartbeat_interval`` (no backoff: leases must be renewed on time), with
        the local lease watchdog running beside it."""
        self.started_ms = self._clock.now_ms()  # when the worker started, not when it was built
        interval = self._config.heartbeat_interval
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watchdog)
            while True:
                # A beat that hangs (Redis paused, a dead connection) is abandoned after two
                # intervals, so the next one can try on a fresh connection.
                with anyio.move_on_after(2 * interval) as scope:
                    try:
                        await self.tick()
                    except Exception:
                        self._log.exception("heartbeat failed unexpectedly")
                if scope.cancelled_caught:
                    self.outage.failed(TimeoutError(f"no answer from Redis within "
                                                    f"{2 * interval:g}s"))
                await anyio.sleep(interval)

    async def _watchdog(self) -> None:
        period = min(self._config.heartbeat_interval / 2, 1.0)
        while True:
            await anyio.sleep(period)
            self.watch()

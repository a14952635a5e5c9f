"""Recoverer: sends tasks whose lease expired (their worker died or hung) to retry or archive.

It also gives a lease to any active task that has none (eviction, a restore, a manual edit), so
no task can stay "active" forever.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any

import anyio

from .._broker import Broker, Outcome
from .._clock import Clock
from .._errors import BrokerError, DecodeError, LeaseExpiredError
from .._log import get_logger
from .._message import decode_message
from .._options import to_ms
from .._outage import Outage
from .._task import task_for_handler
from ._config import WorkerConfig
from ._processor import error_text

_BATCH = 100


class Recoverer:
    """``tick()`` recovers every lease that ended more than ``recover_grace`` ago.

    ``held`` names the tasks this worker itself still runs or holds an outcome for: after an
    outage longer than the lease their leases look expired, but the heartbeat renews them (or
    the acker writes their outcome) as soon as Redis answers, so they are left alone.
    """

    def __init__(self, broker: Broker, config: WorkerConfig, clock: Clock,
                 on_retry_scheduled: Callable[[int], None] | None = None,
                 held: Callable[[], Container[str]] | None = None) -> None:
        self._broker = broker
        self._config = config
        self._clock = clock
        self._on_retry_scheduled = on_retry_scheduled
        self._held = held
        self._log: Any = get_logger("recoverer")
        self.outage = Outage(self._log, "recover expired leases")
        self.recovered = 0

    async def tick(self) -> int:
        """Recover every queue; a queue that fails does not stop the others (the first error is
        raised once all were tried)."""
        count = 0
        error: BrokerError | None = None
        for queue in self._config.queues:
            try:
                count += await self._recover_queue(queue)
            except BrokerError as exc:
                error = error or exc
        self.recovered += count
        if error is not None:
            raise error
        return count

    async def _recover_queue(self, queue: str) -> int:
        count = 0
        attached = await self._broker.reclaim_orphans(queue, 1000)
        if attached:
            self._log.warning("active tasks without a lease found; lease attached",
                              queue=queue, count=attached)
        cutoff = self._clock.now_ms() - int(self._config.recover_grace * 1000)
        while True:
            expired = await self._broker.list_lease_expired(queue, cutoff, _BATCH)
            held = self._held() if self._held is not None else ()
            progress = 0
            for raw in expired:
                if raw.id in held:
                    continue
                outcome = self._outcome(queue, raw.id, raw.msg, raw.payload, raw.retried)
                if await self._broker.recover(outcome, cutoff):
                    progress += 1
                    if outcome.kind == "retry" and self._on_retry_scheduled is not None:
                        self._on_retry_scheduled(outcome.retry_at_ms)
                    self._log.warning("lease expired; task recovered", task_id=raw.id,
                                      queue=queue, outcome=outcome.kind)
            count += progress
            if len(expired) < _BATCH or not progress:
                return count  # (a full batch of tasks this worker holds would be listed again)

    def _outcome(self, queue: str, task_id: str, raw_msg: bytes, payload: bytes,
                 retried: int) -> Outcome:
        err = LeaseExpiredError("task lease expired")
        try:
            msg = decode_message(raw_msg)
        except DecodeError as exc:
            return Outcome("archive", queue, task_id, error=error_text(exc))
        if retried >= msg.max_retry:
            return Outcome("archive", queue, task_id, error=error_text(err))
        task = task_for_handler(msg, payload, retried, 0, None)
        try:
            delay = to_ms(self._config.retry_delay(retried, err, task), "retry_delay result")
            failure = bool(self._config.is_failure(err))
        except Exception:
            self._log.exception("retry_delay/is_failure raised; using 60 s", task_id=task_id)
            delay, failure = 60_000, True
        return Outcome("retry", queue, task_id, retry_at_ms=self._clock.now_ms() + delay,
                       error=error_text(err), is_failure=failure)

    async def run(self) -> None:
        """Recover every ``recover_interval`` (a failed round is retried at the next one)."""
        while True:
            try:
                await self.tick()
                self.outage.succeeded()
            except BrokerError as exc:
                self.outage.failed(exc)
            except Exception as exc:
                self._log.exception("recoverer failed unexpectedly")
                self.outage.failed(exc)
            await anyio.sleep(self._config.recover_interval)

"""Heartbeat: renews the leases of running tasks and publishes this worker's state with a TTL.

A lease that Redis reports lost (the task was recovered, deleted or taken over) or that could not
be renewed before it ran out cancels the handler: the recoverer owns the task from then on.
"""

from __future__ import annotations

import os
import socket
from collections import defaultdict
from typing import Any

import anyio
import orjson

from .._broker import Broker
from .._clock import Clock
from .._errors import BrokerError
from .._log import get_logger
from ._acker import Acker, PendingOutcome
from ._config import WorkerConfig
from ._processor import Processor
from ._running import Running


class Heartbeat:
    """Lease keeper and server-state publisher; ``tick()`` is one beat."""

    def __init__(self, broker: Broker, config: WorkerConfig, processor: Processor, acker: Acker,
                 clock: Clock) -> None:
        self._broker = broker
        self._config = config
        self._processor = processor
        self._acker = acker
        self._clock = clock
        self._log: Any = get_logger("heartbeat", server_id=config.server_id)
        self.started_ms = clock.now_ms()
        self.status = "active"
        self._host = socket.gethostname()
        self._pid = os.getpid()
        self._failing = False

    async def tick(self) -> None:
        """Renew every lease this worker holds, then publish the server state."""
        ok = await self._renew_leases()
        self._expire_local()
        try:
            await self.write_state()
        except BrokerError as exc:
            ok = False
            if not self._failing:
                self._log.warning("writing server state failed", error=str(exc))
        if ok and self._failing:
            self._log.info("heartbeat recovered")
        self._failing = not ok

    async def _renew_leases(self) -> bool:
        by_queue: dict[str, list[str]] = defaultdict(list)
        for running in self._processor.running.values():
            by_queue[running.queue].append(running.id)
        for waiting in self._acker.pending.values():
            by_queue[waiting.outcome.queue].append(waiting.outcome.task_id)
        ok = True
        lease_ms = self._config.lease_ms
        for queue, ids in by_queue.items():
            sent = self._clock.now_ms()
            try:
                flags = await self._broker.extend_leases(queue, ids, self._config.server_id,
                                                         lease_ms)
            except BrokerError as exc:
                ok = False
                if not self._failing:
                    self._log.warning("renewing leases failed", queue=queue, error=str(exc),
                                      tasks=len(ids))
                continue
            for task_id, kept in zip(ids, flags, strict=True):
                run: Running | None = self._processor.running.get(task_id)
                pending: PendingOutcome | None = self._acker.pending.get(task_id)
                if kept:
                    if run is not None:
                        run.lease_until_ms = sent + lease_ms
                    if pending is not None:
                        pending.lease_until_ms = sent + lease_ms
                elif run is not None:
                    self._processor.lease_lost(task_id)
                elif pending is not None:
                    self._acker.lease_lost(task_id)
        return ok

    def _expire_local(self) -> None:
        """Cancel handlers whose lease ran out while Redis could not be reached."""
        now = self._clock.now_ms()
        for run in list(self._processor.running.values()):
            if run.lease_until_ms <= now and run.reason is None:
                self._processor.lease_lost(run.id)

    def server_info(self) -> dict[str, Any]:
        cfg = self._config
        return {
            "server_id": cfg.server_id, "host": self._host, "pid": self._pid,
            "concurrency": cfg.concurrency, "queues": dict(cfg.queues),
            "strict_priority": cfg.strict_priority, "status": self.status,
            "started_at": self.started_ms, "active_workers": len(self._processor.running),
            "processed": self._processor.processed, "failed": self._processor.failed,
            **({"extra": dict(cfg.extra)} if cfg.extra else {}),
        }

    async def write_state(self) -> None:
        workers = {
            run.id: orjson.dumps({
                "task_id": run.id, "type": run.msg.type, "queue": run.queue,
                "started_at": run.started_ms, "deadline": run.deadline_ms,
                "payload_size": len(run.task.payload),
            })
            for run in self._processor.running.values()
        }
        ttl = int(self._config.heartbeat_interval * 2000) + 1000
        await self._broker.write_server_state(self._config.server_id,
                                              orjson.dumps(self.server_info()), workers, ttl)

    async def clear(self) -> None:
        """Remove the server state (last step of shutdown)."""
        try:
            await self._broker.clear_server_state(self._config.server_id)
        except BrokerError as exc:
            self._log.warning("clearing server state failed; it expires by itself",
                              error=str(exc))

    async def run(self) -> None:
        self.started_ms = self._clock.now_ms()  # when the worker started, not when it was built
        while True:
            try:
                await self.tick()
            except Exception:
                self._log.exception("heartbeat failed unexpectedly")
            await anyio.sleep(self._config.heartbeat_interval)

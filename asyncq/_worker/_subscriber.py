"""Subscriber: one pub/sub connection for cancellations and wake-ups, the shard channels
tasks are handed off on in one hop (one connection per master), and the blocked waits for
tasks no wake-up announces (``_pickup``, Go's layout only), reconnecting with backoff.

What it hears comes typed from the broker (``listen_signals``, ``listen_handoffs``); its two
listeners run in one anyio task group, owned by ``run``. A worker serving a pattern
(``tenant:*``) sees its queues change: ``queues_changed`` then widens the wake-ups it hears at
once and subscribes the hand-off channels again, and queues announced as new are passed on to
``on_new_queues``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import anyio
from anyio.abc import TaskStatus

from .._broker import Broker, CancelRequest, Handoff, QueuesAdded, WorkerSignal
from .._errors import BrokerError
from .._log import get_logger
from .._service._outage import Outage
from ._pickup import PendingWatch
from ._running import Stop


class Listener(Protocol):
    """What the subscriber drives (the processor): a run to stop, a fetch loop to wake, a
    hand-off to start."""

    wake: asyncio.Event
    pending: PendingWatch

    def cancel(self, task_id: str, reason: Stop) -> bool: ...

    def receive_handoff(self, handoff: Handoff) -> None: ...


class Subscriber:
    """Cancels running handlers on request and wakes the fetch loop when work arrives."""

    def __init__(self, broker: Broker, processor: Listener, queues: list[str], owner: str,
                 on_due: Callable[[int], None] | None = None,
                 on_reconnect: Callable[[], Awaitable[None]] | None = None,
                 on_new_queues: Callable[[Sequence[str]], None] | None = None) -> None:
        self._broker = broker
        self._on_reconnect = on_reconnect
        self._on_new_queues = on_new_queues
        self._processor = processor
        self._on_due = on_due
        self._queue_list = queues
        """The worker's queues (the list it changes in place when they change)."""
        self._queues = set(queues)
        """The same as a set, read by the broker at each wake-up (kept by ``queues_changed``)."""
        self._handoff_scope: anyio.CancelScope | None = None
        self._pending_scope: anyio.CancelScope | None = None
        self._owner = owner
        self._log = get_logger("subscriber")
        self.outage = Outage(self._log, "subscribe", base=0.2, cap=5.0)
        self.handoff_outage = Outage(self._log, "subscribe to hand-offs", base=0.2, cap=5.0)
        self.connected = False

    @property
    def failures(self) -> int:
        """Failed connection attempts since the last successful subscription."""
        return self.outage.failures

    def handle(self, signal: WorkerSignal) -> None:
        """React to one cancel request or wake-up (exposed for tests)."""
        if isinstance(signal, CancelRequest):
            if self._processor.cancel(signal.task_id, Stop.CANCEL):
                self._log.info("task cancelled on request", task_id=signal.task_id)
        elif isinstance(signal, QueuesAdded):
            if self._on_new_queues is not None:
                self._on_new_queues(signal.queues)
        elif signal.queue in self._queues:
            if signal.due_ms is None:
                self._processor.wake.set()
            elif self._on_due is not None:
                # A task scheduled for later became the queue's earliest.
                self._on_due(signal.due_ms)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Subscribe (reporting ready once subscribed), then dispatch messages until cancelled."""
        async with anyio.create_task_group() as tg:
            handoffs = anyio.Event()
            tg.start_soon(self._run_handoffs, handoffs)
            tg.start_soon(self._run_pending)
            await self._run_channels(task_status, handoffs)

    def queues_changed(self) -> None:
        """The worker's queues changed (a pattern matched new queues, or lost some): hear the
        wake-ups of the new set from now on, and subscribe to its hand-off channels again. A
        hand-off published meanwhile is not lost: nobody hears it, so it goes to another idle
        worker or wakes the queue's waiters, and the resubscription wakes the fetch loop."""
        self._queues.clear()
        self._queues.update(self._queue_list)
        if self._handoff_scope is not None:
            self._handoff_scope.cancel()
        if self._pending_scope is not None:
            self._pending_scope.cancel()

    async def _run_pending(self) -> None:
        """The blocked waits for tasks no wake-up announces (``_pickup``), on the current
        queues (a new set after ``queues_changed``)."""
        while True:
            with anyio.CancelScope() as scope:
                self._pending_scope = scope
                await self._processor.pending.run(list(self._queue_list))

    async def _run_handoffs(self, subscribed: anyio.Event) -> None:
        """Start each task handed off to this worker; after a (re)subscription the fetch loop
        dequeues at once, which returns the hand-offs whose message was lost meanwhile."""
        while True:
            with anyio.CancelScope() as scope:  # cancelled by queues_changed: subscribe again
                self._handoff_scope = scope
                await self._listen_handoffs(subscribed)

    async def _listen_handoffs(self, subscribed: anyio.Event) -> None:
        if not self._queue_list:  # only patterns, none matched yet: until queues_changed
            self._processor.wake.set()
            subscribed.set()
            await anyio.sleep_forever()
        try:
            async for item in self._broker.listen_handoffs(list(self._queue_list), self._owner):
                if item is None:
                    self.handoff_outage.succeeded()
                    self._processor.wake.set()
                    subscribed.set()
                    continue
                self._processor.receive_handoff(item)
        except BrokerError as exc:
            await anyio.sleep(self.handoff_outage.failed(exc))
        except Exception as exc:
            self._log.exception("hand-off subscriber failed unexpectedly")
            await anyio.sleep(self.handoff_outage.failed(exc))

    async def _run_channels(self, task_status: TaskStatus[None],
                            handoffs: anyio.Event) -> None:
        """The wake-up and cancellation channels; ready once both they and ``handoffs`` are
        subscribed."""
        started = False
        while True:
            try:
                async for item in self._broker.listen_signals(
                        self._queues, new_queues=self._on_new_queues is not None):
                    if item is None:
                        self.outage.succeeded()
                        self.connected = True
                        # Wake-ups may have been missed while disconnected: look again.
                        self._processor.wake.set()
                        if not started:
                            await handoffs.wait()
                            started = True
                            task_status.started()
                        elif self._on_reconnect is not None:
                            # Cancellations published while reconnecting were missed: their
                            # markers are read now rather than at the next heartbeat.
                            await self._on_reconnect()
                        continue
                    self.handle(item)
            except BrokerError as exc:
                self.connected = False
                await anyio.sleep(self.outage.failed(exc))
            except Exception as exc:
                self.connected = False
                self._log.exception("subscriber failed unexpectedly")
                await anyio.sleep(self.outage.failed(exc))

"""Processor: the run path of one worker — fetch, run, outcome — read top to bottom.

1. **Fetch** (``run`` → ``tick``): lease tasks whenever slots are free, one dequeue per queue
   in priority order. No polling sleep: when a dequeue leaves slots unfilled, the dequeue
   script also sets the queue's waiters flag; the next enqueue (or forward, requeue, unpause)
   that sees the flag publishes on the wake channel, the subscriber sets ``wake``, and the
   fetch loop dequeues again at once (``idle_poll_interval`` is a safety net; a task no
   wake-up announces, one Go's client enqueued, ends a blocked wait: ``_pickup``). That dequeue
   also registers this worker as idle, so the next task to become pending may arrive already
   leased (one hop: ``handed_off``, decoded in ``_handoffs``).
2. **Admit** (``_admit``): the limits gate claims the limits of leased tasks before they start:
   the limits their handlers declare, and a slot of the queue's cap when the dequeue found one
   (a capped queue's tasks are never handed off); a batch with neither makes no call.
3. **Run** (``take`` → ``_start``): start the handler in its own asyncio task when a slot is
   free (prefetched into ``buffer`` otherwise); its time limit is armed (``_running``).
4. **Outcome** (``_on_done`` → ``_finish``): the slot is freed (and refilled from the buffer),
   ``Endings.ended`` (``_outcomes``) decides what the run becomes, and ``settle`` hands the
   outcome and the task's lease to the acker, which writes it (``_acker``).
5. **Stop** (``cancel``, ``lease_lost``, ``drain``): a run stopped on purpose carries its
   ``Stop`` reason to step 4.

Every task it leases is in the lease table (``_leases``) from its dequeue until the acker
lets go of it. Owners of what runs in the background: a handler's asyncio task is owned here
(``running``; ``drain`` waits for, cancels or abandons each); hand-off admissions run in a
``TaskSet`` that ``drain`` closes.
"""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import anyio

from .._broker import Broker, Handoff, Outcome, RawTask
from .._clock import Clock
from .._errors import BrokerError, DecodeError
from .._log import get_logger, some_ids
from .._model._message import TaskMessage
from .._model._rules import apply_rules, expired_reason
from .._model._task import Task, task_for_handler
from .._service._background import TaskSet
from .._service._backoff import Backoff
from .._service._outage import QueueOutages
from ._config import WorkerConfig
from ._handoffs import Handoffs
from ._invoke import HandlerExit, invoke
from ._leases import OUTCOME, PREFETCHED, RUNNING, Leases
from ._mux import Handler, RulesCache
from ._outcomes import Endings, error_text
from ._pickup import PendingWatch
from ._procpool import ProcessPool
from ._progress import ProgressReports
from ._queues import ServedQueues
from ._retry import QueueOrder
from ._running import Buffered, DeadlineTimers, LateStarts, Running, Stop, limit_of
from ._threads import SyncThreads


class Gate(Protocol):
    """What the processor needs of the limits gate (``_limits.LimitGate``)."""

    @property
    def limits(self) -> object:
        """Truthy once some handler has limits (they may be added until the worker starts)."""

    async def admit(self, queue: str,
                    raws: Sequence[RawTask]) -> tuple[list[RawTask], list[RawTask]]:
        """``(start, give back)``; a task in neither was refused (and deferred)."""

    def release(self, task_id: str) -> None:
        """The outcome of ``task_id`` was decided: give its slots back."""

    def forget(self, task_id: str) -> None:
        """The lease of ``task_id`` was lost: its slots stay tied to that lease."""

    async def settled(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until the slots given back are written."""


class OutcomeSink(Protocol):
    """What the processor needs of the acker (``_acker.Acker``)."""

    def submit(self, outcome: Outcome) -> None:
        """Write ``outcome`` (soon; the task's lease is now held as ``OUTCOME``)."""

    def discard_stale(self, task_id: str) -> None:
        """``task_id`` was leased again: drop an outcome of its earlier run still waiting."""


class Processor:
    """Fetch loop plus the bookkeeping of running handlers.

    Every task it leases goes into ``leases`` (``prefetched`` or ``running``) and is handed over
    to the acker (``outcome``) with its outcome, or released when its lease was lost.
    """

    def __init__(self, broker: Broker, config: WorkerConfig, handler: Handler,
                 acker: OutcomeSink, leases: Leases, clock: Clock,
                 on_started: Callable[[TaskMessage, int], None] | None = None,
                 limits: Gate | None = None, rules: RulesCache | None = None,
                 served: ServedQueues | None = None) -> None:
        self._broker = broker
        self.rules = rules or RulesCache(handler)
        """The task options registered for each task type, applied to its message at start."""
        self._on_started = on_started  # the on_state_change notifier
        self._config = config
        self._handler = handler
        self.threads = SyncThreads(
            config.sync_threads or config.concurrency, sync_handlers=config.sync_handlers,
            observer=config.metrics,
            procs=ProcessPool(config.process_pool_size or os.cpu_count() or 1,
                              max_tasks_per_child=config.max_tasks_per_child,
                              max_memory_per_child=config.max_memory_per_child,
                              kill_grace=config.process_kill_grace, observer=config.metrics,
                              preload=config.preload))
        """Where sync handlers run (see ``_threads``)."""
        self.threads.rules = self.rules  # (what a handler reads through registered_rules)
        self.state: Any = None
        """What the worker's lifespan yielded: every Task's ``state``."""
        self._acker = acker
        self._leases = leases
        self._clock = clock
        self._owner = config.server_id
        self.served = served if served is not None else ServedQueues(config.queues)
        """The queues fetched from (the configured ones, and those their patterns match)."""
        self._order = QueueOrder(config.queues, config.strict_priority, self.served.matched)
        self._log = get_logger("processor", server_id=config.server_id)
        self._observer = config.metrics
        self.outages = QueueOutages(self._log, "dequeue", None if self._observer is None
                                    else self._observer.redis_error)
        """A queue whose dequeue fails (Redis down, a poisoned key) is retried each round
        without holding up the other queues."""
        self._backoff = Backoff(base=0.1, cap=5.0)
        self._unanswered: dict[str, str] = {}
        """Per queue, the id of a dequeue request that failed: it is re-sent with the same id,
        so if Redis did run it (the reply was lost) the tasks it leased come back to us."""
        self.running: dict[str, Running] = {}
        self._deadlines = DeadlineTimers(self.cancel)
        if self.threads.procs is not None:  # (a process-run handler's limit starts in its child)
            self.threads.procs.limits = LateStarts(self.running, self._deadlines, clock.now_ms)
        self.buffer: dict[str, Buffered] = {}
        """Prefetched tasks (leased, lease renewed, not started), oldest first."""
        self._capacity = config.concurrency + (config.prefetch or 0)
        self.abandoned: set[asyncio.Task[Any]] = set()
        """Handler tasks that ignored cancellation: their runs are ended, they are not."""
        self.wake = asyncio.Event()
        self.pending = PendingWatch(broker, self.wake, config.idle_poll_interval)
        """The blocked waits for tasks no wake-up announces (Go's enqueue), armed when idle."""
        self._slot_free = asyncio.Event()
        self._all_done = asyncio.Event()
        self._forced = asyncio.Event()  # a second stop request: do not wait for handlers
        self._task_logs = config.task_logs
        self.endings = Endings(config, clock, self._log, self.settle)
        """Decides, logs, measures and settles how each run ended."""
        self._all_done.set()
        self.fetching = True
        self.handoffs = Handoffs(broker, config, clock, self._log, self.handed_off,
                                 self.served.names)
        """Where the subscriber delivers one-hop hand-offs (passed on to ``handed_off``)."""
        self.limits = limits
        """Claims the limits of leased tasks before they start."""
        self._arriving: set[str] = set()
        """Handed-off tasks whose limits are being claimed (not yet in the leases)."""
        self._admissions = TaskSet(self._admission_failed)
        self.progress = ProgressReports(broker, config.server_id, clock, self._holds,
                                        observer=config.metrics)
        """The running tasks' progress reports (``Task.set_progress``), coalesced."""
        self._report = self.progress.report  # (bound once, not per run)

    @property
    def processed(self) -> int:
        """Runs that finished, succeeded or failed (as the queue counters count them)."""
        return self.endings.processed

    @property
    def failed(self) -> int:
        return self.endings.failed

    @property
    def idle(self) -> bool:
        """True when this worker holds no task to run (none running, none prefetched)."""
        return not (self.running or self.buffer or self.progress.settling)

    # -- 1. fetch

    def stop_fetching(self) -> None:
        """Lease no more tasks; running handlers carry on; prefetched tasks are requeued."""
        self.fetching = False
        self.wake.set()
        self._slot_free.set()
        if self.buffer:
            ids = list(self.buffer)
            self._log.info("prefetched tasks requeued (never started)", count=len(ids),
                           task_ids=some_ids(ids))
        for item in self.buffer.values():
            self.settle(Outcome("requeue", item.queue, item.raw.id))
        self.buffer.clear()

    async def run(self) -> None:
        """Lease tasks whenever slots are free, until ``stop_fetching``."""
        while self.fetching:
            free = self.free_slots()
            if free <= 0:
                self._slot_free.clear()
                await self._slot_free.wait()
                continue
            self.wake.clear()
            try:
                drained = await self.tick(free)
            except Exception:  # a bug must not stop the worker; leased tasks get recovered
                self._log.exception("fetching tasks failed unexpectedly")
                drained = None
            if drained is None:  # every queue failed: back off (exponentially, with jitter)
                await self._back_off(self._backoff.next_delay())
                continue
            self._backoff.reset()
            if drained and self.fetching:
                self.pending.drained()
                with anyio.move_on_after(self._config.idle_poll_interval):
                    await self.wake.wait()

    def queues_found(self, queues: Sequence[str]) -> None:
        """Queues a pattern just matched: fetch at once, trying them first."""
        self._order.found(queues)
        self.wake.set()

    def receive_handoff(self, handoff: Handoff) -> None:
        """A one-hop hand-off heard by the subscriber: ``handoffs`` checks it, then
        ``handed_off`` starts it."""
        self.handoffs.receive(handoff)

    def free_slots(self) -> int:
        """How many more tasks this worker may lease (running + prefetched)."""
        return self._capacity - len(self.running) - len(self.buffer)

    async def _back_off(self, delay: float) -> None:
        """Wait before the next dequeue after a failure; a wake-up (the subscriber reconnected,
        work arrived) ends the wait early."""
        with anyio.move_on_after(delay):
            await self.wake.wait()

    @property
    def failing_queues(self) -> list[str]:
        return self.outages.failing

    async def tick(self, free: int) -> bool | None:
        """One fetch round over the queues in priority order; True when all were drained,
        None when every queue failed."""
        got = 0
        failed = 0
        waiter_ttl = int(self._config.idle_poll_interval * 3000)
        order = self._order()
        for queue in order:
            want = min(free - got, self._config.dequeue_batch)
            before = self._clock.now_ms()
            request = self._unanswered.pop(queue, None) or uuid.uuid4().hex
            released = self._leases.releases
            try:
                raws, dropped = await self._broker.dequeue(queue, want, self._owner,
                                                           self._config.lease_ms, waiter_ttl,
                                                           request, one_hop=True)
            except Exception as exc:  # BrokerError, or a reply the broker could not parse
                self._unanswered[queue] = request
                self.outages.failed(queue, exc, exc_info=not isinstance(exc, BrokerError))
                failed += 1
                continue
            self.handoffs.registered = True
            self.outages.succeeded(queue)
            if dropped:
                self._log.warning("dropped pending ids without a usable task record",
                                  queue=queue, count=dropped)
            lease_until = before + self._config.lease_ms
            arriving = self._arriving
            # Skipped: those this worker holds (unless a new run of one whose outcome is being
            # written), and a run it took and let go of since the request was sent (its
            # outcome was written after the dequeue ran).
            leases = self._leases
            raws = [r for r in raws
                    if (r.id not in leases or leases.takes_again(r.id, r.pending_since))
                    and r.id not in arriving
                    and not leases.ran_already(r.id, r.pending_since, released)]
            leased = len(raws)
            self.pending.dequeued(queue, leased)
            if leased:
                self._order.took(queue)  # a pattern's next round starts after this queue
            if self.limits is not None and raws and (raws[0].capped or self.limits.limits):
                raws = await self._admit(queue, raws, lease_until)
            for raw in raws:
                self.take(queue, raw, lease_until)
            got += len(raws)
            if leased == want:
                return False
        return None if failed == len(order) else True

    def handed_off(self, queue: str, raw: RawTask, lease_until: int) -> None:
        """A task arrived already leased to this worker (one hop): start it as if dequeued,
        or give it back next in line when this worker is stopping or has no free slot."""
        if ((raw.id in self._leases and not self._leases.takes_again(raw.id, raw.pending_since))
                or raw.id in self._arriving
                or self._leases.ran_already(raw.id, raw.pending_since)):
            return  # a dequeue returned it first
        if not self.fetching or self.free_slots() <= 0:
            # Registered on several queues, one hand-off filled the last slot: the requeue
            # hands it to another idle worker.
            self._leases.add(raw.id, queue, lease_until, PREFETCHED)
            self.settle(Outcome("requeue", queue, raw.id))
            return
        if self.limits is not None and self.limits.limits:
            self._arriving.add(raw.id)
            self._admissions.spawn(self._admit_handed_off(queue, raw, lease_until))
        else:
            self.take(queue, raw, lease_until)
        self.wake.set()

    # -- 2. admit

    async def _admit(self, queue: str, raws: list[RawTask], lease_until: int) -> list[RawTask]:
        """The leased tasks that may start: limits claimed (a refused task was deferred and
        is no longer ours); those whose claim failed are requeued."""
        assert self.limits is not None
        admitted, back = await self.limits.admit(queue, raws)
        for raw in back:
            self._leases.add(raw.id, queue, lease_until, PREFETCHED)
            self.settle(Outcome("requeue", queue, raw.id))
        return admitted

    async def _admit_handed_off(self, queue: str, raw: RawTask, lease_until: int) -> None:
        try:
            for admitted in await self._admit(queue, [raw], lease_until):
                self.take(queue, admitted, lease_until)
        finally:
            self._arriving.discard(raw.id)

    def _admission_failed(self, exc: BaseException) -> None:
        self._log.error("admitting a handed-off task failed; its lease is recovered",
                        error=error_text(exc), exc_info=exc)

    # -- 3. run

    def take(self, queue: str, raw: RawTask, lease_until: int) -> None:
        """A task was just leased: start it when a slot is free, else keep it for the next."""
        self._acker.discard_stale(raw.id)
        self._leases.taken(raw.id, raw.pending_since)
        if len(self.running) < self._config.concurrency or not self.fetching:
            self._leases.add(raw.id, queue, lease_until, RUNNING)
            self._start(queue, raw)
        else:
            self._leases.add(raw.id, queue, lease_until, PREFETCHED)
            self.buffer[raw.id] = Buffered(queue, raw)

    def _start(self, queue: str, raw: RawTask) -> None:
        """Start the handler of a leased task; a task that cannot be started (undecodable, a
        stored time out of range) is archived with its reason and never stops the others."""
        now = self._clock.now_ms()
        try:
            msg = raw.msg
            if isinstance(msg, DecodeError):
                raise msg
            if msg.id != raw.id or msg.queue != queue:
                raise DecodeError(f"message names task {msg.id!r} in queue {msg.queue!r} "
                                  f"but is stored as {raw.id!r} in {queue!r}")
            rules = self.rules(msg.type)
            apply_rules(msg, rules)
            if msg.expires_at_ms and msg.expires_at_ms <= now:
                # Its handler's expires_in ran out, or it waited here (prefetched) too long.
                self.settle(Outcome("expire", queue, raw.id,
                                    error=expired_reason(msg.expires_at_ms)))
                return
            deadline, limit = limit_of(now, msg)
            task = task_for_handler(msg, raw.payload, raw.retried, deadline,
                                    functools.partial(self._write_result, queue, msg.id),
                                    self.state, self._report)
        except Exception as exc:  # DecodeError, or a time beyond what datetime can hold
            error = exc if isinstance(exc, DecodeError) else DecodeError(
                f"stored task cannot be started: {error_text(exc)}")
            self._log.error("undecodable task archived", task_id=raw.id, queue=queue,
                            error=error_text(error))
            self.settle(Outcome("archive", queue, raw.id, error=error_text(error)))
            return
        run = Running(msg, task, now, deadline, rules)
        self.running[run.id] = run
        self._all_done.clear()
        if self._on_started is not None:
            self._on_started(msg, raw.retried)
        if self._observer is not None:
            wait = (now - raw.pending_since) / 1000 if raw.pending_since else None
            self._observer.started(queue, msg.type, wait)
        if self._task_logs == "debug":
            self._log.debug("task started", task_id=msg.id, queue=queue, type=msg.type,
                            retried=raw.retried)
        if limit is not None and deadline <= now:
            run.reason = limit
            self._finish(run, None, cancelled=True)
            return
        loop = asyncio.get_running_loop()
        self.progress.bind(loop)
        atask: asyncio.Task[Any] = loop.create_task(
            invoke(self._handler, self.threads, task, msg, run))
        run.atask = atask
        if limit is not None:
            self._deadlines.arm(run, (deadline - now) / 1000, limit)
        atask.add_done_callback(functools.partial(self._on_done, run))

    def _holds(self, task: Task) -> bool:
        """Whether ``task`` is a run this worker holds and has not stopped (any thread)."""
        run = self.running.get(task.id or "")
        return run is not None and run.task is task and run.reason is None

    async def _write_result(self, queue: str, task_id: str, data: bytes, encoding: str) -> int:
        """A running task's ``write_result`` (bound to it with ``functools.partial``: two
        objects per run, where a closure made five)."""
        run = self.running.get(task_id)
        if run is None or run.reason is not None:
            raise RuntimeError("cannot write the result: the task is no longer running")
        return await self._broker.write_result(queue, task_id, data, encoding)

    # -- 4. outcome

    def _on_done(self, run: Running, atask: asyncio.Task[Any]) -> None:
        if atask.cancelled():
            exc: BaseException | None = None
            cancelled = True
        else:
            exc = atask.exception()
            if isinstance(exc, HandlerExit):
                exc = exc.original
            cancelled = False
        if self.running.get(run.id) is run:
            self._finish(run, exc, cancelled=cancelled, result_task=atask)

    def _finish(self, run: Running, exc: BaseException | None, *, cancelled: bool,
                result_task: asyncio.Task[Any] | None = None) -> None:
        """End ``run``: free its slot (refilled from the prefetch buffer), then let
        ``Endings`` decide, log and settle its outcome."""
        del self.running[run.id]
        self._deadlines.disarm(run)
        if run.grace_timer is not None:
            run.grace_timer.cancel()
        while self.buffer and self.fetching and len(self.running) < self._config.concurrency:
            # Refill the slot from the prefetch buffer now, without a round trip to Redis (the
            # next one too when this one did not start: it had expired, or was undecodable).
            task_id = next(iter(self.buffer))
            item = self.buffer.pop(task_id)
            self._leases.move(task_id, RUNNING)
            self._start(item.queue, item.raw)
        if not self.running:
            self._all_done.set()
        self._slot_free.set()
        if run.reason is Stop.LEASE_LOST:  # the task is someone else's now
            self._leases.release(run.id, RUNNING)
            if run.id in self.progress.runs:
                self.progress.drop(run.id)
        self.endings.ended(run, exc, cancelled, result_task)

    def settle(self, outcome: Outcome) -> None:
        """Hand the task and its lease over to the acker, which writes ``outcome``."""
        self._leases.move(outcome.task_id, OUTCOME)
        if outcome.task_id in self.progress.runs:  # its last progress report goes first
            self.progress.settle(outcome.task_id, functools.partial(self._acker.submit, outcome))
        else:
            self._acker.submit(outcome)
        if self.limits is not None:
            self.limits.release(outcome.task_id)

    # -- 5. stop

    def cancel(self, task_id: str, reason: Stop | str) -> bool:
        """Stop a task this worker holds on purpose, for ``reason`` (a ``Stop``, or its value);
        False when this worker does not run it.

        A handler that already returned (its completion not yet processed) is not cancelled:
        its own outcome stands.
        """
        reason = Stop(reason)
        item = self.buffer.pop(task_id, None)
        if item is not None:  # prefetched, not started: settle it without running it
            if reason is Stop.LEASE_LOST:  # the task is someone else's now
                self._leases.release(task_id, PREFETCHED)
            else:
                self.endings.unstarted(item.queue, task_id, reason)
            return True
        run = self.running.get(task_id)
        if run is None or run.reason is not None or run.atask is None or run.atask.done():
            return False
        run.reason = reason
        run.atask.cancel()
        run.grace_timer = asyncio.get_running_loop().call_later(
            self._config.cancel_grace, self._abandon, run)
        return True

    def lease_lost(self, task_id: str) -> bool:
        """The lease could not be kept: stop the handler (or drop the prefetched task); the
        recoverer owns the task now. False when there was nothing left to stop."""
        if self.limits is not None:
            self.limits.forget(task_id)
        if self.cancel(task_id, Stop.LEASE_LOST):
            self._log.warning("lease lost; handler cancelled", task_id=task_id)
            return True
        return False

    def _abandon(self, run: Running) -> None:
        if self.running.get(run.id) is not run or run.atask is None:
            return
        self._log.error("handler ignored cancellation; abandoning it", task_id=run.id,
                        queue=run.queue, type=run.msg.type, reason=run.reason)
        self.abandoned.add(run.atask)
        run.atask.add_done_callback(self.abandoned.discard)
        self._finish(run, None, cancelled=True)

    async def wait_idle(self) -> None:
        """Return once no handler is running (at once when none is)."""
        await self._all_done.wait()

    @property
    def forced(self) -> bool:
        """True once ``force_drain`` was called."""
        return self._forced.is_set()

    def force_drain(self) -> None:
        """Stop waiting for running handlers: ``drain`` cancels and requeues them now."""
        self._forced.set()

    async def drain(self, timeout: float) -> None:
        """Stop fetching, let handlers finish for ``timeout`` s, then cancel and requeue the rest.

        A handler that ignores cancellation is abandoned after a short grace (logged).
        """
        self.stop_fetching()
        # A hand-off still claiming its limits starts (not fetching: at once) or goes back.
        await self._admissions.close(1.0)
        with anyio.move_on_after(timeout):
            async with anyio.create_task_group() as tg:
                async def until(event: asyncio.Event) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(until, self._all_done)
                tg.start_soon(until, self._forced)
        if self.running:
            ids = list(self.running)
            self._log.warning("requeueing running tasks" if self._forced.is_set()
                              else "shutdown timeout reached; requeueing running tasks",
                              count=len(ids), task_ids=some_ids(ids))
            for task_id in list(self.running):
                self.cancel(task_id, Stop.SHUTDOWN)
            with anyio.move_on_after(min(self._config.cancel_grace, 1.0)):
                await self._all_done.wait()
            for run in list(self.running.values()):
                self._abandon(run)
        for holder in (RUNNING, PREFETCHED):  # leased but never started (a bug): send back
            for task_id, queue in self._leases.held_by(holder):
                if task_id not in self.running:
                    self._log.error("leased task never started; requeued", task_id=task_id,
                                    queue=queue)
                    self.settle(Outcome("requeue", queue, task_id))
        await self.progress.close(1.0)
        await self.endings.hooks_done(1.0)
        if self.limits is not None:
            await self.limits.settled(1.0)

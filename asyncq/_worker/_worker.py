"""Worker: runs handlers for tasks of its queues, with every background component beside them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import signal
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
from anyio.abc import TaskStatus

from .._broker import Broker, Capability, ConnectionOptions, RedisLike, open_broker
from .._clock import SYSTEM_CLOCK, Clock
from .._defaults import LOOP_WATCH_TICK
from .._errors import BrokerError, WorkerStartupError
from .._limits import gate_for
from .._log import get_logger
from .._service._health import LoopWatch, ProbeServer
from .._service._lifecycle import start_background, stop_background
from .._service._signals import signal_handlers
from .._workflow._advance import Advancer
from ._acker import Acker
from ._aggregator import Aggregator
from ._burst import BurstWatch
from ._config import WorkerConfig, check_option_names
from ._discovery import QueueDiscovery
from ._forwarder import Forwarder
from ._healthcheck import HealthChecker
from ._heartbeat import Heartbeat
from ._janitor import Janitor
from ._leases import Leases
from ._mux import Handler, RulesCache, ServeMux, SyncOrAsyncHandler, check_handler
from ._notifier import Notifier
from ._outcomes import error_text
from ._probes import WorkerProbes, running_tasks, task_of
from ._processor import Processor
from ._queues import ServedQueues
from ._recoverer import Recoverer
from ._subscriber import Subscriber
from ._threads import log_left_behind


class Worker:
    """Runs ``handler`` (usually a ServeMux) for tasks of the configured queues.

    ``await worker.run()`` runs until cancelled, ``stop()`` or SIGTERM/SIGINT (SIGTSTP stops
    fetching but keeps running). ``async with worker:`` runs it in the background of the current
    event loop and shuts it down gracefully on exit.

    Redis is a URL or redis.asyncio client (see ``ConnectionOptions``, given as ``connection``,
    for the settings of a client made from a URL), or an asyncq ``Broker`` given as
    ``broker=`` (or in place of ``redis``), which stays the caller's: the worker closes only a
    broker it made. Options are those of ``WorkerConfig``, given as keywords or as one
    ``config=WorkerConfig(...)`` (not both).
    """

    def __init__(self, redis: RedisLike | Broker | None = None,
                 handler: SyncOrAsyncHandler | None = None,
                 *, broker: Broker | None = None, config: WorkerConfig | None = None,
                 clock: Clock | None = None, connection: ConnectionOptions | None = None,
                 **options: Any) -> None:
        if not callable(handler):
            raise TypeError(f"handler must be callable (a ServeMux, an async function, or a "
                            f"plain function run in a thread), got {handler!r}")
        if config is None:
            check_option_names(options)
            config = WorkerConfig(**options)
        elif not isinstance(config, WorkerConfig):
            raise TypeError(f"config must be a WorkerConfig, got {config!r}")
        elif options:
            raise TypeError(f"give either config= or worker options ({', '.join(options)}), "
                            f"not both: use dataclasses.replace(config, ...) to change a config")
        self.handler: Handler = check_handler(handler, "handler")
        self.config = cfg = config
        self.clock = clock or SYSTEM_CLOCK
        self.broker, self._owns_broker = open_broker(redis, broker, clock=self.clock,
                                                     connection=connection)
        for queue in ServedQueues(cfg.queues).exact:  # (asyncq's own layout refuses some names)
            getattr(self.broker, "check_queue_name", str)(queue)
        self.served = ServedQueues(cfg.queues, getattr(self.broker, "accepts_queue", None))
        """The queues served: the configured ones, and those their patterns match."""
        queues = self.served.names  # one list, grown in place as patterns match new queues
        self.leases = Leases()
        """Every task this worker holds a lease on, shared by the components below."""
        self.forwarder = Forwarder(self.broker, queues, cfg.forward_interval, self.clock)
        self.notifier = (Notifier(cfg.on_state_change, self.clock)
                         if cfg.on_state_change is not None else None)
        notifier = self.notifier
        self.acker = Acker(self.broker, cfg.server_id, self.leases,
                           on_retry_written=self.forwarder.poke,
                           on_written=notifier.written if notifier else None)
        self.rules = RulesCache(self.handler)
        """The task options registered for each task type: what its tasks run by."""
        self.processor = Processor(self.broker, cfg, self.handler, self.acker, self.leases,
                                   self.clock, on_started=notifier.started if notifier else None,
                                   limits=gate_for(self.handler, self.broker, cfg.server_id,
                                                   self.forwarder.poke, cfg.metrics),
                                   rules=self.rules, served=self.served)
        self.heartbeat = Heartbeat(self.broker, cfg, self.leases, self.processor, self.acker,
                                   self.clock, served=self.served)
        if cfg.metrics is not None:
            processor = self.processor
            cfg.metrics.bind(concurrency=cfg.concurrency,
                             in_flight=lambda: len(processor.running),
                             prefetched=lambda: len(processor.buffer))
            if (bind_queues := getattr(cfg.metrics, "bind_queues", None)) is not None:
                bind_queues(list(cfg.queues))  # (labels a pattern's queues by the pattern)
            self.acker.outage.on_failure = cfg.metrics.redis_error
            self.heartbeat.outage.on_failure = cfg.metrics.redis_error
        self.recoverer = Recoverer(self.broker, cfg, self.clock,
                                   on_retry_scheduled=self.forwarder.poke, held=self.leases,
                                   rules=self.rules, queues=queues)
        self.advancer = Advancer(self.broker, queues, cfg.server_id, cfg.workflow_interval)
        self.janitor = Janitor(self.broker, queues, cfg.janitor_interval, cfg.janitor_batch,
                               cfg.orphan_scan_count)
        self.discovery = (QueueDiscovery(self.broker, self.served, cfg.queue_scan_interval,
                                         self._queues_changed)
                          if self.served.dynamic else None)
        """Keeps the queues the patterns match current (None without a pattern)."""
        self.subscriber = Subscriber(self.broker, self.processor, queues, cfg.server_id,
                                     on_due=self.forwarder.poke,
                                     on_reconnect=self._reconnected,
                                     on_new_queues=(self.discovery.announced
                                                    if self.discovery is not None else None))
        self.aggregator = (Aggregator(self.broker, cfg, self.clock, queues)
                           if cfg.group_aggregator is not None else None)
        self.burst = (BurstWatch(self.broker, cfg, self.processor, self.acker, self.clock,
                                 self.stop, queues) if cfg.burst else None)
        self.healthchecker = (HealthChecker(self.broker, cfg.health_check,
                                            cfg.health_check_interval)
                              if cfg.health_check is not None else None)
        running = self.processor.running
        self.loop_watch = LoopWatch(
            warn_after=cfg.stall_warning, tick=min(LOOP_WATCH_TICK, cfg.stall_timeout / 4),
            running=lambda: running_tasks(running), name_task=task_of(running),
            on_lag=getattr(cfg.metrics, "loop_lagged", None),
            on_stall=getattr(cfg.metrics, "loop_stalled", None), name_after=cfg.stall_timeout,
            server_id=cfg.server_id)
        """Notices (logs, measures) an event loop that stops turning: see ``stall_warning``."""
        if (bind_loop := getattr(cfg.metrics, "bind_loop", None)) is not None:
            watch = self.loop_watch
            bind_loop(lambda: watch.blocked_s)
        self.probes = WorkerProbes(self.loop_watch, self.broker, cfg.stall_timeout,
                                   self._probe_state)
        """/livez and /readyz of this worker (served on health_port when given)."""
        self._probe_server: ProbeServer | None = None
        self._log = get_logger("worker", server_id=cfg.server_id)
        self._state = "new"
        self._ready = asyncio.Event()
        self._shutdown = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._advancer_scope: anyio.CancelScope | None = None
        self._startup: anyio.CancelScope | None = None

    def _queues_changed(self, added: list[str], removed: list[str]) -> None:
        """The patterns matched new queues (or some left the registry): the subscriber hears
        their wake-ups and hand-offs, and the fetch loop tries the new ones at once."""
        self._log.info("queues matched", added=added, removed=removed,
                       matched={p: len(q) for p, q in self.served.matched.items()})
        self.subscriber.queues_changed()
        self.processor.queues_found(added)
        if self._advancer_scope is not None:  # its wake-up channels are the queues': again
            self._advancer_scope.cancel()

    async def _run_advancer(self) -> None:
        """The workflow advancer, started again when the queues change (it subscribes to the
        outbox wake-ups of the queues it starts with; a round cut short is replayed)."""
        while True:
            with anyio.CancelScope() as scope:
                self._advancer_scope = scope
                await self.advancer.run()

    async def _reconnected(self) -> None:
        """The subscriber reconnected: what was published meanwhile was missed (cancellations,
        new queues), so the leases (with their cancel markers) and the registry are read now."""
        if self.discovery is not None:
            self.discovery.poke()
        await self.heartbeat.renew_now()

    @property
    def ready(self) -> bool:
        """True once the worker is subscribed and fetching."""
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    @property
    def health_port(self) -> int | None:
        """The port /livez and /readyz are served on while the worker runs (the one picked
        when health_port=0), else None."""
        return self._probe_server.port if self._probe_server is not None else None

    def _probe_state(self) -> str:
        """What /readyz says of the worker itself (Redis aside)."""
        if self._shutdown.is_set() or self._state == "closed":
            return "stopping"
        if not self._ready.is_set():
            return "waiting for redis" if self.subscriber.outage.ongoing else "starting"
        if not self.processor.fetching:
            return "stopped fetching"
        return "ready"

    def _serve_probes(self) -> None:
        """Watch the loop; serve the probes when health_port is set (WorkerStartupError when
        the port cannot be had)."""
        cfg = self.config
        self.loop_watch.start()
        self.probes.loop = asyncio.get_running_loop()
        if cfg.health_port is None:
            return
        try:
            self._probe_server = ProbeServer(self.probes.routes(), host=cfg.health_host,
                                             port=cfg.health_port)
        except OSError as exc:
            self.loop_watch.stop()
            raise WorkerStartupError(f"cannot serve health probes on {cfg.health_host}:"
                                     f"{cfg.health_port}: {exc.strerror or exc}") from None
        self._log.info("serving health probes", host=cfg.health_host, port=self.health_port,
                       paths=["/livez", "/readyz"])

    def _stop_probes(self) -> None:
        self.loop_watch.stop()
        if self._probe_server is not None:
            self._probe_server.close()
            self._probe_server = None

    def stop(self) -> None:
        """Request a graceful shutdown (the order is written in ``run``); a second request
        (a second Ctrl-C) stops waiting for running handlers: they are cancelled and requeued
        at once, as when ``shutdown_timeout`` is reached.

        Before the worker is ready (e.g. Redis cannot be reached) this abandons the start-up.
        """
        if self._shutdown.is_set():
            if self.processor.running and not self.processor.forced:
                self._log.warning("second stop request: cancelling and requeueing the running "
                                  "tasks now", running=len(self.processor.running))
            self.processor.force_drain()
            return
        if self._ready.is_set():
            self._log.info("worker shutting down", running=len(self.processor.running),
                           waiting_up_to_s=self.config.shutdown_timeout,
                           hint="stop again (Ctrl-C) to requeue running tasks at once")
        self._shutdown.set()
        self.processor.stop_fetching()
        self.heartbeat.status = "stopping"
        if self._startup is not None:
            self._startup.cancel()

    def stop_fetching(self) -> None:
        """Lease no new tasks but keep running the current ones (what SIGTSTP does)."""
        self.processor.stop_fetching()
        self.heartbeat.status = "stopped"
        self._log.info("stopped fetching new tasks")

    def _signals(self, enabled: bool) -> contextlib.AbstractContextManager[None]:
        return signal_handlers(enabled, {signal.SIGTERM: self.stop, signal.SIGINT: self.stop,
                                         signal.SIGTSTP: self.stop_fetching})

    async def run(self, *, handle_signals: bool = True,
                  task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until stopped; every component lives in one task group.

        ``task_status.started()`` is called once the worker is ready (subscribed and about to
        fetch), so ``await task_group.start(worker.run)`` returns then.
        """
        if self._state != "new":
            raise RuntimeError("a Worker runs once; create a new Worker to run again")
        self._state = "running"
        cfg = self.config
        self._log.info("worker starting", queues=dict(cfg.queues), concurrency=cfg.concurrency,
                       strict_priority=cfg.strict_priority)
        if isinstance(self.handler, ServeMux) and not self.handler.patterns():
            self._log.warning("the ServeMux has no handlers: every task will fail with "
                              "HandlerNotFoundError and be retried; register handlers with "
                              "@mux.handler(...) before starting the worker")
        try:
            self._serve_probes()
            with self._signals(handle_signals):
                lifespan = await self._enter_lifespan()
                try:  # (after a stop() during the lifespan's start, this returns at once)
                    await self._serve(task_status)
                finally:
                    if lifespan is not None:
                        with anyio.CancelScope(shield=True):
                            await self._exit_lifespan(lifespan)
        finally:
            with anyio.CancelScope(shield=True):
                # 6. Clear the server state, after every other component has stopped.
                await self.heartbeat.clear()
                if self._owns_broker:
                    await self.broker.close()
            self._state = "closed"
            self._stop_probes()
            self._log.info("worker stopped", processed=self.processor.processed,
                           failed=self.processor.failed,
                           abandoned=len(self.processor.abandoned))

    async def _serve(self, task_status: TaskStatus[None]) -> None:
        """Every component in one task group, until stopped and drained; a queue its broker
        refuses (one of the other layout) ends the worker at start with that BrokerError,
        nothing written."""
        refused = await self._serve_group(task_status)
        if refused is not None:
            raise refused

    async def _serve_group(self, task_status: TaskStatus[None]) -> BrokerError | None:
        async with anyio.create_task_group() as tg:
            # The subscriber is subscribed before the first dequeue, so no cancellation
            # or wake-up published after a task is leased can be missed. While Redis
            # cannot be reached this waits, but stop() still ends the worker.
            if not await self._subscribe(tg):
                tg.cancel_scope.cancel()
                return None
            scanned = False  # (subscribed first: a queue announced from now on is heard)
            if self.discovery is not None:
                with contextlib.suppress(BrokerError):  # (else its first round does it)
                    await self.discovery.scan()
                    scanned = True
            refused = await self._check_layout()
            if refused is not None:
                tg.cancel_scope.cancel()
                return refused
            with contextlib.suppress(BrokerError):  # (else the heartbeat does it)
                await self.broker.register_queues(self.served.exact)
                # Published before the first task is leased, so no running task of
                # this worker can look like one whose worker is gone.
                self.heartbeat.started_ms = self.clock.now_ms()
                await self.heartbeat.write_state()
            tg.start_soon(self.acker.run)
            tg.start_soon(self.heartbeat.run)
            tg.start_soon(self.forwarder.run)
            tg.start_soon(self.recoverer.run)
            tg.start_soon(self.janitor.run)
            if Capability.WORKFLOWS in self.broker.capabilities:
                tg.start_soon(self._run_advancer)
            if self.discovery is not None:
                tg.start_soon(functools.partial(self.discovery.run, wait_first=scanned))
            if self.aggregator is not None:
                tg.start_soon(self.aggregator.run)
            if self.healthchecker is not None:
                tg.start_soon(self.healthchecker.run)
            if self.notifier is not None:
                tg.start_soon(self.notifier.run)
            if self.burst is not None:
                tg.start_soon(self.burst.run)
            self._ready.set()
            task_status.started()
            self._log.info("worker ready")
            try:
                await self.processor.run()
                await self._shutdown.wait()  # after SIGTSTP: keep running until told
            finally:
                with anyio.CancelScope(shield=True):
                    await self._drain()
                tg.cancel_scope.cancel()
        return None

    async def _check_layout(self) -> BrokerError | None:
        """The BrokerError refusing a configured queue that holds the other layout's data (the
        broker's layout check, reads only), None when every queue may be served or Redis
        cannot be reached yet (the registration is then retried by the heartbeat)."""
        layout = getattr(self.broker, "layout", None)
        if layout is None:
            return None
        try:
            await layout.check(self.served.exact)
        except BrokerError as exc:
            return exc if exc.refused else None
        return None

    async def _enter_lifespan(self) -> AbstractAsyncContextManager[Any] | None:
        """Enter the lifespan (its value becomes every task's ``state``): the entered context
        manager, None without a lifespan or when stop() came first. A failure to start is
        WorkerStartupError."""
        factory = self.config.lifespan or getattr(self.handler, "lifespan", None)
        if factory is None or self._shutdown.is_set():
            return None
        name = getattr(factory, "__qualname__", None) or repr(factory)
        with anyio.CancelScope() as scope:
            self._startup = scope
            try:
                manager = factory()
                if not hasattr(manager, "__aenter__") or not hasattr(manager, "__aexit__"):
                    if inspect.iscoroutine(manager):
                        manager.close()
                    raise TypeError(f"it returned {manager!r}, not an async context manager "
                                    f"(decorate it with @contextlib.asynccontextmanager)")
                self.processor.state = await manager.__aenter__()
            except Exception as exc:
                self._log.error("worker lifespan failed to start", lifespan=name,
                                error=error_text(exc), exc_info=exc)
                raise WorkerStartupError(f"the worker's lifespan {name} failed to start: "
                                         f"{error_text(exc)}") from exc
        self._startup = None
        return None if scope.cancelled_caught else manager

    async def _exit_lifespan(self, manager: AbstractAsyncContextManager[Any]) -> None:
        """Exit the lifespan after the last outcome was written; a failure is logged (the
        worker has stopped cleanly by then)."""
        try:
            await manager.__aexit__(None, None, None)
        except Exception as exc:
            self._log.error("worker lifespan failed to exit cleanly", error=error_text(exc),
                            exc_info=exc)

    async def _subscribe(self, tg: anyio.abc.TaskGroup) -> bool:
        """Start the subscriber; False when stop() came first."""
        with anyio.CancelScope() as scope:
            self._startup = scope
            if self._shutdown.is_set():
                scope.cancel()
            await tg.start(self.subscriber.run)
        self._startup = None
        return not scope.cancelled_caught

    async def _drain(self) -> None:
        # Shutdown order — senders stop before receivers:
        # 1. stop fetching (no new leases);
        # 2. wait up to shutdown_timeout for running handlers to finish (a hand-off still
        #    claiming its limits first starts or goes back);
        # 3. cancel the handlers still running; their tasks are requeued, next in line; async
        #    error_handler calls get a short grace, then are cancelled (the processor owns
        #    every task it started: see _service/_background);
        # 4. write every outcome; the heartbeat keeps those leases alive meanwhile;
        # 5. stop the heartbeat, forwarder, recoverer, janitor, aggregator and subscriber
        #    (the caller cancels the task group);
        # 6. clear the server state (in run's finally).
        self.heartbeat.status = "stopping"
        self.processor.stop_fetching()
        await self.processor.handoffs.leave_idle()
        await self.processor.drain(self.config.shutdown_timeout)
        log_left_behind(self.processor.threads, self.config.server_id)
        if self.processor.threads.procs is not None:
            await self.processor.threads.procs.close()
        if not await self.acker.drain(self.config.lease_duration + 1.0):
            self._log.error("outcomes left unwritten at shutdown (Redis did not take them); "
                            "their leases expire and those tasks are recovered and run again",
                            count=len(self.acker.pending), task_ids=sorted(self.acker.pending))

    async def __aenter__(self) -> Self:
        self._runner = await start_background(self.run(handle_signals=False), self._ready,
                                              self.stop)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await stop_background(self._runner, self.stop)

"""How a finished run ends: its outcome decided, logged, measured and handed to the acker,
and the ``error_handler`` called for a failure. The processor says *that* a run ended (and
why); this says *what* that means."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import anyio
from structlog.typing import FilteringBoundLogger

from .._broker import Outcome
from .._clock import Clock
from .._errors import HandlerNotFoundError, LeaseExpiredError
from .._observe import RunOutcome
from ._config import WorkerConfig
from ._invoke import contained
from ._outcomes import ResultError, error_text, failure_outcome, success_outcome
from ._running import Running


class Endings:
    """The end of every run of one worker, and its counters."""

    def __init__(self, config: WorkerConfig, clock: Clock, log: FilteringBoundLogger,
                 settle: Callable[[Outcome], None]) -> None:
        self._config = config
        self._clock = clock
        self._log = log
        self._settle = settle
        self._observer = config.metrics
        self._task_logs = config.task_logs
        self._unknown_types: set[str] = set()  # task types already reported as unhandled
        self._hooks: set[asyncio.Future[Any]] = set()
        self.processed = 0  # runs that finished, succeeded or failed (as the queue counters)
        self.failed = 0

    def requeued(self, run: Running) -> None:
        """Stopped by the worker's shutdown: back to pending, not a failure."""
        self._observe(run, "requeued", False)
        self._settle(Outcome("requeue", run.queue, run.id))

    def lease_lost(self, run: Running) -> None:
        """Its lease was lost (the task is someone else's now): nothing to write."""
        self._observe(run, "lease_lost", False)
        self._call_error_handler(run, LeaseExpiredError("task lease expired"))

    def succeeded(self, run: Running, value: Any) -> None:
        try:
            outcome = success_outcome(run.msg, value, self._log)
        except ResultError as exc:  # a result that cannot be stored fails the run
            self.run_failed(run, exc)
            return
        self.processed += 1
        self._observe(run, "succeeded", False)
        if self._task_logs != "off":
            log = self._log.info if self._task_logs == "info" else self._log.debug
            log("task succeeded", task_id=run.id, queue=run.queue, type=run.msg.type,
                **run.trace, duration_s=round((self._clock.now_ms() - run.started_ms) / 1000, 3),
                outcome=outcome.kind)
        self._settle(outcome)

    def run_failed(self, run: Running, exc: BaseException) -> None:
        """The handler raised (or timed out, or was cancelled): retry, archive or revoke."""
        # "processed" counts every finished run, as the queues' counters do; failed a subset.
        self.processed += 1
        self.failed += 1
        task = run.task
        text = error_text(exc)
        log = self._log.bind(task_id=run.id, queue=run.queue, type=run.msg.type, **run.trace)
        unknown = isinstance(exc, HandlerNotFoundError)
        if unknown and self._config.unknown_type == "archive":
            outcome = Outcome("archive", run.queue, run.id, error=text)
        else:
            outcome = failure_outcome(run.queue, run.id, task, exc, self._config, self._clock,
                                      log)
        self._observe_failure(run, outcome)
        if unknown:
            # A type nobody handles (a typo, or a rolling deploy): one warning per type, no
            # traceback (it would only show asyncq's routing).
            if run.msg.type not in self._unknown_types:
                self._unknown_types.add(run.msg.type)
                log.warning("no handler for this task type", error=text,
                            policy=self._config.unknown_type)
        elif outcome.kind == "done":
            log.info("task revoked", error=text)
        elif outcome.kind == "archive":
            log.warning("task archived", error=text, retried=task.retried, exc_info=exc)
        else:
            log.warning("task failed; will retry", error=text, retried=task.retried,
                        retry_in=(outcome.retry_at_ms - self._clock.now_ms()) / 1000,
                        exc_info=exc)
        self._settle(outcome)
        self._call_error_handler(run, exc)

    async def hooks_done(self, timeout: float) -> None:
        """Give the ``error_handler`` calls still running up to ``timeout`` seconds."""
        if self._hooks:
            with anyio.move_on_after(timeout):
                await asyncio.gather(*self._hooks, return_exceptions=True)

    def _observe(self, run: Running, outcome: RunOutcome, failed: bool) -> None:
        if self._observer is not None:
            run_s = (self._clock.now_ms() - run.started_ms) / 1000
            self._observer.finished(run.queue, run.msg.type, outcome, failed, run_s)

    def _observe_failure(self, run: Running, outcome: Outcome) -> None:
        if self._observer is None:
            return
        if outcome.kind == "done":
            self._observe(run, "revoked", False)
        elif run.reason == "cancel":
            self._observe(run, "cancelled", False)
        else:
            self._observe(run, "retried" if outcome.kind == "retry" else "archived", True)

    def _call_error_handler(self, run: Running, exc: BaseException) -> None:
        hook = self._config.error_handler
        if hook is None:
            return
        try:
            result = hook(run.task, exc)
        except BaseException:  # even SystemExit: a hook must not stop the worker
            self._log.exception("error_handler raised", task_id=run.id)
            return
        if inspect.isawaitable(result):
            hook_task = asyncio.ensure_future(contained(result))
            self._hooks.add(hook_task)
            hook_task.add_done_callback(self._hook_done)

    def _hook_done(self, hook_task: asyncio.Future[Any]) -> None:
        self._hooks.discard(hook_task)
        if not hook_task.cancelled():
            exc = hook_task.exception()
            if exc is not None:
                self._log.error("error_handler raised", error=error_text(exc))

"""What a run becomes: how a run that ended is ended (``Endings``: its outcome decided, logged,
measured and handed to the acker, the ``error_handler`` called for a failure), what that
outcome is (``success_outcome``, ``failure_outcome``, and the error a ``Stop`` ends with), and
the error text stored with it (``error_text``).

The processor says *that* a run ended and why (``_processor``); this says *what* that means.
The recoverer (a lease expired: the run failed with ``LeaseExpiredError``) decides failures
with the same ``failure_outcome``, so a retry policy applies the same way to both; the acker
writes the outcome (``_acker``).
"""

from __future__ import annotations

import asyncio
import inspect
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from structlog.typing import FilteringBoundLogger

from .._broker import Outcome
from .._clock import MAX_TIME_MS, Clock
from .._defaults import TASK_TRACEBACK_FRAMES, TASK_TRACEBACK_MAX
from .._errors import (
    HandlerNotFoundError,
    LeaseExpiredError,
    ResultError,
    Retry,
    RevokeTask,
    SkipRetry,
    TaskCancelledError,
)
from .._model._message import TaskMessage
from .._model._payload import encode_payload
from .._model._rules import COMPLETION_MARK_MS, HandlerRules, kept_for
from .._model._task import Task
from .._observe import RunOutcome
from .._service._background import TaskSet
from .._validate import to_ms
from ._config import WorkerConfig
from ._invoke import HandlerExit, contained
from ._retry import default_retry_delay
from ._running import Running, Stop

FALLBACK_RETRY_DELAY = default_retry_delay
"""The retry delay used when the configured ``retry_delay`` raises or returns something that is
not a duration: the default schedule (15-44 s for a first retry, growing with each retry), so a
broken policy neither loses the task nor retries it in a tight loop while it is being fixed."""

FALLBACK_IS_FAILURE = True
"""A failure counts as one (``failed`` in the queue stats) when ``is_failure`` raises."""


# -- 1. ending a run: what the processor calls when a run ended


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
        self._traceback_on = config.traceback_on
        self._unknown_types: set[str] = set()  # task types already reported as unhandled
        self.hooks = TaskSet(self._hook_failed)
        """The async ``error_handler`` calls still running (awaited by ``hooks_done``)."""
        self.processed = 0  # runs that finished, succeeded or failed (as the queue counters)
        self.failed = 0

    def ended(self, run: Running, exc: BaseException | None, cancelled: bool,
              atask: asyncio.Task[Any] | None) -> None:
        """``run`` ended: its handler raised ``exc`` (None: it returned, or it never started),
        its task was ``cancelled``, or the worker stopped it for ``run.reason``."""
        reason = run.reason
        if reason is Stop.SHUTDOWN:
            self._requeued(run)
        elif reason is Stop.LEASE_LOST:
            self._lease_lost(run)
        else:
            exc = stopped_error(reason, cancelled) or exc
            if exc is None:
                self._succeeded(run, None if atask is None else atask.result())
            else:
                self._failed(run, exc)

    def unstarted(self, queue: str, task_id: str, reason: Stop) -> None:
        """A prefetched task (leased, never started) was stopped for ``reason``: archived when
        cancelled on request, else requeued; not a run, so not counted."""
        if reason is Stop.CANCEL:
            error = error_text(TaskCancelledError("task cancelled on request"))
            self._settle(Outcome("archive", queue, task_id, error=error))
        else:
            self._settle(Outcome("requeue", queue, task_id))

    def _requeued(self, run: Running) -> None:
        """Stopped by the worker's shutdown: back to pending, not a failure."""
        self._observe(run, "requeued", False)
        self._settle(Outcome("requeue", run.queue, run.id))

    def _lease_lost(self, run: Running) -> None:
        """Its lease was lost (the task is someone else's now): nothing to write."""
        self._observe(run, "lease_lost", False)
        self._call_error_handler(run, LeaseExpiredError("task lease expired"))

    def _succeeded(self, run: Running, value: Any) -> None:
        try:
            outcome = success_outcome(run.msg, value, self._log)
        except ResultError as exc:  # a result that cannot be stored fails the run
            self._failed(run, exc)
            return
        self.processed += 1
        self._observe(run, "succeeded", False)
        if self._task_logs != "off":
            log = self._log.info if self._task_logs == "info" else self._log.debug
            log("task succeeded", task_id=run.id, queue=run.queue, type=run.msg.type,
                retried=run.task.retried, **run.trace,
                duration_s=round((self._clock.now_ms() - run.started_ms) / 1000, 3),
                outcome=outcome.kind)
        self._settle(outcome)

    def _failed(self, run: Running, exc: BaseException) -> None:
        """The handler raised (or timed out, or was cancelled): retry, archive or revoke."""
        # "processed" counts every finished run, as the queues' counters do; failed a subset.
        self.processed += 1
        self.failed += 1
        task = run.task
        text = error_text(exc)
        log = self._log.bind(task_id=run.id, queue=run.queue, type=run.msg.type,
                             retried=task.retried, **run.trace)
        unknown = isinstance(exc, HandlerNotFoundError)
        if unknown and self._config.unknown_type == "archive":
            outcome = Outcome("archive", run.queue, run.id, error=text)
        else:
            outcome = failure_outcome(run.queue, run.id, task, exc, self._config, self._clock,
                                      log, run.rules)
        if not unknown and outcome.kind in ("retry", "archive"):
            outcome = replace(outcome, traceback=error_traceback(exc))
        if outcome.kind == "retry" and run.msg.expires_at_ms:  # (a retry after it: archived)
            outcome = replace(outcome, expires_at_ms=run.msg.expires_at_ms)
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
            log.warning("task archived", error=text,
                        **_traceback(exc, self._traceback_on != "off"))
        else:
            # One short line per retry; the traceback waits for the archive (traceback_on).
            log.warning("task failed; will retry", error=text,
                        retry_in=round((outcome.retry_at_ms - self._clock.now_ms()) / 1000, 3),
                        **_traceback(exc, self._traceback_on == "failure"))
        self._settle(outcome)
        self._call_error_handler(run, exc)

    async def hooks_done(self, timeout: float) -> None:
        """Give the ``error_handler`` calls still running up to ``timeout`` seconds; those
        still running then are cancelled."""
        await self.hooks.close(timeout)

    def _observe(self, run: Running, outcome: RunOutcome, failed: bool) -> None:
        if self._observer is not None:
            run_s = (self._clock.now_ms() - run.started_ms) / 1000
            self._observer.finished(run.queue, run.msg.type, outcome, failed, run_s)

    def _observe_failure(self, run: Running, outcome: Outcome) -> None:
        if self._observer is None:
            return
        if outcome.kind == "done":
            self._observe(run, "revoked", False)
        elif run.reason is Stop.CANCEL:
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
            self.hooks.spawn(contained(result))

    def _hook_failed(self, exc: BaseException) -> None:
        if isinstance(exc, HandlerExit):
            exc = exc.original
        self._log.error("error_handler raised", error=error_text(exc))


def _traceback(exc: BaseException, wanted: bool) -> dict[str, BaseException]:
    """The log line's ``exc_info`` when its traceback is ``wanted`` (``traceback_on``)."""
    return {"exc_info": exc} if wanted else {}


# -- 2. what the outcome is


def success_outcome(msg: TaskMessage, value: Any, log: FilteringBoundLogger) -> Outcome:
    """The outcome of a handler that returned ``value``: kept for its retention with the value
    as its result (without one, a value is kept for RESULT_RETENTION: ``kept_for``), else
    deleted — leaving a completion mark for COMPLETION_MARK when it returned nothing and has
    no retention, none at ``retention=0`` (the value then travels only with the completion
    event). Raises ResultError when a kept value cannot be stored; one that is not kept and
    cannot be encoded is only logged (nothing would hold it)."""
    keep = kept_for(msg.retention_ms, value is not None)
    result, encoding = None, "b"
    if value is not None:
        try:
            result, encoding = encode_result(value)
        except ResultError as exc:
            if keep:
                raise
            log.warning("handler result not sent with the completion event", task_id=msg.id,
                        error=str(exc))
    if not keep:
        mark = COMPLETION_MARK_MS if keep is None else 0
        return Outcome("done", msg.queue, msg.id, retention_ms=mark, result=result,
                       result_enc=encoding)
    return Outcome("complete", msg.queue, msg.id, retention_ms=keep, result=result,
                   result_enc=encoding)


def failure_outcome(queue: str, task_id: str, task: Task, exc: BaseException,
                    config: WorkerConfig, clock: Clock, log: FilteringBoundLogger,
                    rules: HandlerRules | None = None) -> Outcome:
    """The outcome of a run that failed with ``exc``.

    ``RevokeTask``: deleted. ``SkipRetry``, a cancellation on request, an error its handler's
    ``retry_on`` does not list, or no retry left: archived. Otherwise retried after
    ``Retry.delay``, else the handler's ``retry_delay``, else the worker's (a policy hook
    that raises is logged and replaced by its ``FALLBACK_*``). A lost lease
    (``LeaseExpiredError``) is the worker's failure, not the handler's: ``retry_on`` does not
    apply to it.
    """
    text = error_text(exc)
    if isinstance(exc, RevokeTask):
        return Outcome("done", queue, task_id, error=text)
    if not retried(task, exc, rules):
        return Outcome("archive", queue, task_id, error=text)
    if isinstance(exc, Retry):
        delay_ms, failure = _checked_delay_ms(exc.delay, "Retry delay", task, exc, log), True
    else:
        delay_ms = _retry_delay_ms(task, exc, config, log, rules)
        try:
            failure = bool(config.is_failure(exc))
        except BaseException as hook_exc:  # even SystemExit: a policy bug fails no worker
            log.exception("is_failure raised; counting the error as a failure",
                          error=error_text(hook_exc))
            failure = FALLBACK_IS_FAILURE
    # A delay of up to 10 000 years is valid; the retry time stays one a datetime can hold.
    retry_at = min(clock.now_ms() + delay_ms, MAX_TIME_MS)
    return Outcome("retry", queue, task_id, retry_at_ms=retry_at, error=text,
                   is_failure=failure)


def retried(task: Task, exc: BaseException, rules: HandlerRules | None) -> bool:
    """Whether a run of ``task`` that failed with ``exc`` is retried: not after ``RevokeTask``,
    ``SkipRetry`` or a cancellation on request, nor with no retry left, nor for an error its
    handler's ``retry_on`` does not list (a lost lease or ``Retry`` always may be). The one
    rule, shared by ``failure_outcome`` and the Django runner (which must know it to report a
    final failure)."""
    if (isinstance(exc, RevokeTask | SkipRetry | TaskCancelledError)
            or task.retried >= task.max_retry):
        return False
    if rules is None or rules.retry_on is None or isinstance(exc, Retry | LeaseExpiredError):
        return True
    return isinstance(exc, rules.retry_on)


def _retry_delay_ms(task: Task, exc: BaseException, config: WorkerConfig,
                    log: FilteringBoundLogger, rules: HandlerRules | None) -> int:
    policy = rules.retry_delay if rules is not None and rules.retry_delay is not None \
        else config.retry_delay
    try:
        delay = policy(task.retried, exc, task)
    except BaseException as hook_exc:  # even SystemExit
        log.exception("retry_delay raised; using the default retry delay",
                      error=error_text(hook_exc))
        return _fallback_delay_ms(task, exc)
    return _checked_delay_ms(delay, "retry_delay result", task, exc, log)


def _checked_delay_ms(delay: object, name: str, task: Task, exc: BaseException,
                      log: Any) -> int:
    """``delay`` in ms when it is a valid duration (finite, >= 0, at most 10 000 years); else
    one warning and the default delay, so a bad delay never strands the task active."""
    try:
        return to_ms(delay, name)
    except ValueError as bad:  # (DurationTypeError is one too)
        log.warning("bad retry delay; using the default retry delay", error=str(bad))
        return _fallback_delay_ms(task, exc)


def _fallback_delay_ms(task: Task, exc: BaseException) -> int:
    return to_ms(FALLBACK_RETRY_DELAY(task.retried, exc, task), "default retry delay")



def stopped_error(reason: Stop | None, cancelled: bool) -> BaseException | None:
    """The error a run stopped on purpose ends with (its deadline, its timeout, a cancel
    request) or a handler cancelled otherwise; None when it was not stopped."""
    if reason is Stop.DEADLINE:
        return TimeoutError("task deadline passed (the deadline it was enqueued with)")
    if reason is Stop.TIMEOUT:
        return TimeoutError("task timeout exceeded (it ran longer than its timeout)")
    if reason is Stop.CANCEL:
        return TaskCancelledError("task cancelled on request")
    if cancelled:
        return asyncio.CancelledError("handler was cancelled")
    return None



def encode_result(value: Any) -> tuple[bytes, str]:
    """``value`` as stored and its encoding (bytes as they are, else JSON); raises
    ResultError when JSON cannot hold it exactly (NaN and infinities would silently become
    ``null``)."""
    try:
        return encode_payload(value)
    except ValueError as exc:
        raise ResultError(f"handler result cannot be stored: {exc.__cause__ or exc}") from exc


def unstorable_outcome(outcome: Outcome, exc: BaseException) -> Outcome:
    """What is written instead of ``outcome`` when Redis refused it for good (``exc``): the
    same failure (retry or archive; a success becomes an archive) with a short ASCII error
    ``outcome could not be stored: <reason>``, so the task still gets exactly one outcome."""
    reason = error_text(exc).encode("ascii", "backslashreplace").decode()[:500]
    kind: Literal["retry", "archive"] = "retry" if outcome.kind == "retry" else "archive"
    return Outcome(kind, outcome.queue, outcome.task_id, retry_at_ms=outcome.retry_at_ms,
                   error=f"outcome could not be stored: {reason}")


# -- 3. the error text stored with it


def storable(text: str) -> str:
    """``text`` made encodable as UTF-8: a lone surrogate (what ``os.listdir`` returns for a
    file name that is not UTF-8) becomes its ``\\udcff`` escape instead of failing the write."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


def error_text(exc: BaseException) -> str:
    """``ExcType: message`` (just the type name when the message is empty), always storable:
    an exception whose ``str()`` raises is named by its type alone."""
    try:
        text = str(exc)
    except Exception:
        text = "<message could not be read>"
    name = type(exc).__name__
    return storable(f"{name}: {text}") if text else name


def error_traceback(exc: BaseException, limit: int = TASK_TRACEBACK_MAX) -> str:
    """The traceback stored with a failed task: its innermost ``TASK_TRACEBACK_FRAMES``
    frames per exception, then at most its last ``limit`` bytes (whole lines: the frames
    nearest the error and the exception line), after a note of what was cut; "" when ``exc``
    was never raised (nothing to show beyond its error text)."""
    if exc.__traceback__ is None:
        return ""
    try:
        text = storable("".join(traceback.TracebackException.from_exception(
            exc, limit=-TASK_TRACEBACK_FRAMES).format()))
    except Exception:  # a broken __str__ or a cycle in the chain: the error text must do
        return ""
    data = text.encode()
    if len(data) <= limit:
        return text
    tail = data[-limit:].decode("utf-8", "ignore")
    tail = tail[tail.find("\n") + 1:]
    return f"[first {len(data) - len(tail.encode())} bytes cut]\n{tail}"

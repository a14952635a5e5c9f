"""What a run becomes: the outcome written for a task whose handler returned or failed.

The processor (a handler returned or raised) and the recoverer (a lease expired: the run failed
with ``LeaseExpiredError``) decide failures with the same function, so a retry policy applies
the same way to both.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from structlog.typing import FilteringBoundLogger

from .._broker import Outcome
from .._clock import MAX_TIME_MS, Clock
from .._errors import Retry, RevokeTask, SkipRetry
from .._model._message import TaskMessage
from .._model._payload import encode_payload
from .._model._task import Task
from .._validate import to_ms
from ._config import WorkerConfig
from ._retry import default_retry_delay

FALLBACK_RETRY_DELAY = default_retry_delay
"""The retry delay used when the configured ``retry_delay`` raises or returns something that is
not a duration: the default schedule (15-44 s for a first retry, growing with each retry), so a
broken policy neither loses the task nor retries it in a tight loop while it is being fixed."""

FALLBACK_IS_FAILURE = True
"""A failure counts as one (``failed`` in the queue stats) when ``is_failure`` raises."""


class TaskCancelledError(Exception):
    """The task was cancelled on request (``Client.cancel`` / the inspector)."""


def stopped_error(reason: str | None, cancelled: bool) -> BaseException | None:
    """The error a run stopped on purpose ends with (its deadline, its timeout, a cancel
    request) or a handler cancelled otherwise; None when it was not stopped."""
    if reason == "deadline":
        return TimeoutError("task deadline passed (the deadline it was enqueued with)")
    if reason == "timeout":
        return TimeoutError("task timeout exceeded (it ran longer than its timeout)")
    if reason == "cancel":
        return TaskCancelledError("task cancelled on request")
    if cancelled:
        return asyncio.CancelledError("handler was cancelled")
    return None


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


def unstorable_outcome(outcome: Outcome, exc: BaseException) -> Outcome:
    """What is written instead of ``outcome`` when Redis refused it for good (``exc``): the
    same failure (retry or archive; a success becomes an archive) with a short ASCII error
    ``outcome could not be stored: <reason>``, so the task still gets exactly one outcome."""
    reason = error_text(exc).encode("ascii", "backslashreplace").decode()[:500]
    kind: Literal["retry", "archive"] = "retry" if outcome.kind == "retry" else "archive"
    return Outcome(kind, outcome.queue, outcome.task_id, retry_at_ms=outcome.retry_at_ms,
                   error=f"outcome could not be stored: {reason}")


class ResultError(ValueError):
    """A handler returned a value that cannot be stored as its result (a set, NaN, a string
    with a lone surrogate...): the run counts as failed, with this as its error."""


def encode_result(value: Any) -> tuple[bytes, str]:
    """``value`` as stored and its encoding (bytes as they are, else JSON); raises
    ResultError when JSON cannot hold it exactly (NaN and infinities would silently become
    ``null``)."""
    try:
        return encode_payload(value)
    except ValueError as exc:
        raise ResultError(f"handler result cannot be stored: {exc.__cause__ or exc}") from exc


def success_outcome(msg: TaskMessage, value: Any, log: FilteringBoundLogger) -> Outcome:
    """The outcome of a handler that returned ``value``: deleted (the value then travels only
    with the completion event), or kept for its retention with the value as its result.
    Raises ResultError when a kept value cannot be stored; one that is not kept and cannot be
    encoded is only logged (nothing would hold it)."""
    retention = msg.retention_ms
    result, encoding = None, "b"
    if value is not None:
        try:
            result, encoding = encode_result(value)
        except ResultError as exc:
            if retention:
                raise
            log.warning("handler result not sent with the completion event", task_id=msg.id,
                        error=str(exc))
    if not retention:
        return Outcome("done", msg.queue, msg.id, result=result, result_enc=encoding)
    return Outcome("complete", msg.queue, msg.id, retention_ms=retention, result=result,
                   result_enc=encoding)


def failure_outcome(queue: str, task_id: str, task: Task, exc: BaseException,
                    config: WorkerConfig, clock: Clock, log: FilteringBoundLogger) -> Outcome:
    """The outcome of a run that failed with ``exc``.

    ``RevokeTask``: deleted. ``SkipRetry``, a cancellation on request or no retry left:
    archived. Otherwise retried after ``Retry.delay`` or the configured ``retry_delay`` (a
    policy hook that raises is logged and replaced by its ``FALLBACK_*``).
    """
    text = error_text(exc)
    if isinstance(exc, RevokeTask):
        return Outcome("done", queue, task_id, error=text)
    if isinstance(exc, SkipRetry | TaskCancelledError) or task.retried >= task.max_retry:
        return Outcome("archive", queue, task_id, error=text)
    if isinstance(exc, Retry):
        delay_ms, failure = _checked_delay_ms(exc.delay, "Retry delay", task, exc, log), True
    else:
        delay_ms = _retry_delay_ms(task, exc, config, log)
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


def _retry_delay_ms(task: Task, exc: BaseException, config: WorkerConfig,
                    log: FilteringBoundLogger) -> int:
    try:
        delay = config.retry_delay(task.retried, exc, task)
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

"""What a run becomes: the outcome written for a task whose handler returned or failed.

The processor (a handler returned or raised) and the recoverer (a lease expired: the run failed
with ``LeaseExpiredError``) decide failures with the same function, so a retry policy applies
the same way to both.
"""

from __future__ import annotations

from typing import Any

from structlog.typing import FilteringBoundLogger

from .._broker import Outcome
from .._clock import Clock
from .._errors import Retry, RevokeTask, SkipRetry
from .._message import TaskMessage
from .._payload import encode_payload
from .._task import Task
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


def error_text(exc: BaseException) -> str:
    """``ExcType: message`` (just the type name when the message is empty)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def success_outcome(msg: TaskMessage, value: Any, log: FilteringBoundLogger) -> Outcome:
    """The outcome of a handler that returned ``value``: deleted (the value only travels with
    the completion event), or kept for its retention with the value as its result (a value
    that cannot be encoded is logged, not stored)."""
    result, encoding = None, "b"
    if value is not None:
        try:
            result, encoding = encode_payload(value)
        except ValueError as exc:
            log.warning("handler result not stored", task_id=msg.id, error=str(exc))
    retention = msg.retention_ms
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
        delay_ms, failure = int(exc.delay * 1000), True
    else:
        delay_ms = _retry_delay_ms(task, exc, config, log)
        try:
            failure = bool(config.is_failure(exc))
        except Exception as hook_exc:
            log.exception("is_failure raised; counting the error as a failure",
                          error=str(hook_exc))
            failure = FALLBACK_IS_FAILURE
    return Outcome("retry", queue, task_id, retry_at_ms=clock.now_ms() + delay_ms, error=text,
                   is_failure=failure)


def _retry_delay_ms(task: Task, exc: BaseException, config: WorkerConfig,
                    log: FilteringBoundLogger) -> int:
    try:
        return to_ms(config.retry_delay(task.retried, exc, task), "retry_delay result")
    except Exception as hook_exc:
        log.exception("retry_delay raised; using the default retry delay", error=str(hook_exc))
        return to_ms(FALLBACK_RETRY_DELAY(task.retried, exc, task), "default retry delay")

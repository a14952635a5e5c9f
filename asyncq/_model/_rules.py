"""The rules a task runs by — retries, time limit, retention, retry timing — and where each
comes from: the producer's explicit option wins, else the handler's registration
(``mux.handle(..., max_retry=3)``, ``@mux.task(..., timeout=60)``), else the default.

The worker applies them when it runs a task, so they hold however the task was enqueued (the
Client, ``apply``, the CLI, a workflow step, another service); the Inspector applies the same
rules (published by the live workers) so listings show the values that will apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .._clock import MAX_TIME_MS, ms_to_datetime
from .._defaults import COMPLETION_MARK, DEFAULT_MAX_RETRY, DEFAULT_TIMEOUT_MS, RESULT_RETENTION
from .._validate import to_int, to_ms
from ._message import NO_TIMEOUT, TaskMessage

RetryDelayFn = Callable[[int, BaseException, Any], Any]
"""``retry_delay(retried, error, task) -> seconds`` (a float or a timedelta); the task is an
``asyncq.Task`` (not named here: the model's modules must not import in a circle)."""


@dataclass(frozen=True, slots=True)
class HandlerRules:
    """The task options a handler was registered with (None: not set there)."""

    max_retry: int | None = None
    timeout_ms: int | None = None  # NO_TIMEOUT: no limit
    retention_ms: int | None = None
    retry_delay: RetryDelayFn | None = None
    retry_on: tuple[type[BaseException], ...] | None = None
    #: A task of this handler not started this long after it was enqueued is archived unrun
    #: (its own ``expires_in``/``expires_at`` wins); see ``expiry_of``.
    expires_ms: int | None = None

    def over(self, outer: HandlerRules | None) -> HandlerRules:
        """These rules, with what they leave unset taken from ``outer`` (an enclosing mux)."""
        if outer is None:
            return self
        return HandlerRules(*(mine if mine is not None else theirs for mine, theirs in zip(
            self._values(), outer._values(), strict=True)))

    def _values(self) -> tuple[Any, ...]:
        return (self.max_retry, self.timeout_ms, self.retention_ms, self.retry_delay,
                self.retry_on, self.expires_ms)

    def published(self) -> dict[str, Any]:
        """The rules the Inspector can apply (the callables stay in the worker): what a worker
        publishes in its server state."""
        doc: dict[str, Any] = {}
        if self.max_retry is not None:
            doc["max_retry"] = self.max_retry
        if self.timeout_ms is not None:
            doc["timeout_ms"] = self.timeout_ms
        if self.retention_ms is not None:
            doc["retention_ms"] = self.retention_ms
        if self.expires_ms is not None:
            doc["expires_ms"] = self.expires_ms
        return doc

    @classmethod
    def from_published(cls, doc: Mapping[str, Any]) -> HandlerRules:
        def num(name: str) -> int | None:
            value = doc.get(name)
            return int(value) if value is not None else None
        return cls(num("max_retry"), num("timeout_ms"), num("retention_ms"),
                   expires_ms=num("expires_ms"))


RESULT_RETENTION_MS = round(RESULT_RETENTION * 1000)
COMPLETION_MARK_MS = round(COMPLETION_MARK * 1000)


def handler_rules(*, max_retry: object = None, timeout: object = None, retention: object = None,
                  retry_delay: object = None, retry_on: object = None,
                  expires_in: object = None, what: str = "handler") -> HandlerRules | None:
    """Validate the task options of a handler registration; None when none is set. A bad value
    raises ValueError/TypeError naming the option, at registration."""
    if all(v is None for v in (max_retry, timeout, retention, retry_delay, retry_on,
                               expires_in)):
        return None
    if max_retry is not None and (not isinstance(max_retry, int) or isinstance(max_retry, bool)):
        raise TypeError(f"{what}: max_retry must be an int, got {max_retry!r}")
    retries = to_int(max_retry, f"{what}: max_retry", allow_none=True)
    timeout_ms = None
    if timeout is not None:
        timeout_ms = to_ms(timeout, f"{what}: timeout") or NO_TIMEOUT
    retention_ms = None if retention is None else to_ms(retention, f"{what}: retention")
    delay: RetryDelayFn | None = None
    if retry_delay is not None:
        delay = _delay_fn(retry_delay, what)
    expires_ms = None
    if expires_in is not None:
        if (isinstance(expires_in, int | float | timedelta) and not isinstance(expires_in, bool)
                and (expires_in.total_seconds() if isinstance(expires_in, timedelta)
                     else expires_in) <= 0):
            raise ValueError(f"{what}: expires_in must be more than 0 seconds (how long a task "
                             f"may wait to start), got {expires_in!r}; leave it out for none")
        expires_ms = max(1, to_ms(expires_in, f"{what}: expires_in"))
    return HandlerRules(retries, timeout_ms, retention_ms, delay, _exception_types(retry_on, what),
                        expires_ms)


def _delay_fn(value: object, what: str) -> RetryDelayFn:
    if callable(value) and not isinstance(value, timedelta):
        return value
    seconds = to_ms(value, f"{what}: retry_delay") / 1000  # (seconds or a timedelta)

    def fixed(retried: int, exc: BaseException, task: Any) -> float:
        return seconds
    return fixed


def _exception_types(value: object, what: str) -> tuple[type[BaseException], ...] | None:
    if value is None:
        return None
    types = value if isinstance(value, tuple | list) else (value,)
    if not types or not all(isinstance(t, type) and issubclass(t, BaseException)
                            for t in types):
        raise TypeError(f"{what}: retry_on must be an exception type or a tuple of them "
                        f"(e.g. retry_on=(ConnectionError, TimeoutError)), got {value!r}")
    return tuple(types)


def effective(msg: TaskMessage, rules: HandlerRules | None) -> tuple[int, int, int | None]:
    """``(max_retry, timeout_ms, retention_ms)`` that apply to ``msg``: what its producer set,
    else ``rules``, else the defaults. ``timeout_ms`` 0 or NO_TIMEOUT: no timeout (0: the
    deadline alone limits the run); ``retention_ms`` None: the result rule (``kept_for``)."""
    max_retry = msg.max_retry
    if max_retry is None:
        max_retry = (rules.max_retry if rules is not None and rules.max_retry is not None
                     else DEFAULT_MAX_RETRY)
    timeout = msg.timeout_ms
    if timeout == 0:
        if rules is not None and rules.timeout_ms is not None:
            timeout = rules.timeout_ms
        elif not msg.deadline_ms:
            timeout = DEFAULT_TIMEOUT_MS
    retention = msg.retention_ms
    if retention is None and rules is not None:
        retention = rules.retention_ms
    return max_retry, timeout, retention


def expiry_of(msg: TaskMessage, rules: HandlerRules | None) -> int:
    """When ``msg`` expires (Unix ms; 0 never): its producer's ``expires_in``/``expires_at``,
    else its enqueue time plus the handler's ``expires_in``. The scripts that start a task
    check the first (it is in the message); the worker checks the second when it starts the
    task (the scripts do not know the handlers)."""
    if msg.expires_at_ms:
        return msg.expires_at_ms
    if rules is not None and rules.expires_ms is not None and msg.enqueued_at_ms > 0:
        return min(msg.enqueued_at_ms + rules.expires_ms, MAX_TIME_MS)
    return 0


def expired_reason(expires_at_ms: int) -> str:
    """The error an expired task is archived with; the scripts write the same words
    (``asyncq_expired_reason`` in ``lua/_expiry_lib.lua``)."""
    return f"expired: not started by its expiry at {iso_ms(expires_at_ms)}"


def iso_ms(ms: int) -> str:
    """A Unix-ms time as ``2026-05-01T12:00:00.000Z`` (how the expiry reasons write times)."""
    return ms_to_datetime(ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def apply_rules(msg: TaskMessage, rules: HandlerRules | None) -> TaskMessage:
    """``msg`` (changed in place, and returned) with what its producer left unset filled in
    from ``rules``, else the defaults (``effective``, ``expiry_of``): what the worker runs it
    by."""
    msg.max_retry, msg.timeout_ms, msg.retention_ms = effective(msg, rules)
    msg.expires_at_ms = expiry_of(msg, rules)
    return msg


def kept_for(retention_ms: int | None, returned_value: bool) -> int | None:
    """How long (ms) a completed task is kept: its retention when one applies (0: not at all);
    else the result rule — a value it returned is kept for RESULT_RETENTION; a task that
    returned nothing leaves only a completion mark (None here; see COMPLETION_MARK)."""
    if retention_ms is not None:
        return retention_ms
    return RESULT_RETENTION_MS if returned_value else None

"""The asyncq exception tree.

    AsyncqError                       root of every error asyncq raises
    ├── DuplicateTaskError            a unique task with the same key is already queued
    ├── TaskIDConflictError           a task with the same id already exists in the queue
    ├── TaskNotFoundError             no task with that id in that queue
    ├── TaskFailedError               Client.result: the task was archived, revoked or deleted
    │                                 (defined beside TaskInfo, which it carries)
    ├── ResultNotKeptError            Client.result: a large result without retention is gone
    ├── WaitTimeoutError              Client.wait/result/apply: the timeout ran out (also a
    │                                 TimeoutError; carries the task's last known state)
    ├── QueueNotFoundError            the queue is unknown
    ├── QueueNotEmptyError            a queue still holds tasks (delete without force)
    ├── TaskStateError                the operation is not allowed in the task's current state
    ├── LeaseExpiredError             the worker lost the lease of a running task
    ├── HandlerNotFoundError          no handler is registered for the task type
    ├── DecodeError                   a stored task message could not be decoded
    ├── WorkerStartupError            Worker.run: the worker's lifespan failed to start
    └── BrokerError                   Redis failed (``transient``/``refused`` say what trying
                                      again can do; the redis error is chained as __cause__,
                                      for debugging only)

Handler signals (raised by a handler to steer what happens next; not failures of asyncq):
    SkipRetry   archive now, whatever retries are left
    RevokeTask  delete the task (counted as processed, not failed)
    Retry       retry after ``delay`` seconds (counts as a retry)
"""

from __future__ import annotations

from datetime import timedelta

from ._validate import to_seconds


class AsyncqError(Exception):
    """Base class of every error raised by asyncq."""


class DuplicateTaskError(AsyncqError):
    """A unique task with the same uniqueness key is already queued (its lock has not expired).

    ``task_id`` is the id of the task holding the lock (None if it ended meanwhile), so an
    idempotent endpoint can answer with the task already queued."""

    def __init__(self, message: str, task_id: str | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id


class TaskIDConflictError(AsyncqError):
    """A task with the same id already exists in the queue (in any state, archived included)."""


class TaskNotFoundError(AsyncqError):
    """No task with that id exists in that queue."""


class ResultNotKeptError(AsyncqError):
    """``Client.result``: the task succeeded, but its result was too large to travel with the
    completion event (over 64 KiB) and the task had no retention to keep it."""


class QueueNotFoundError(AsyncqError):
    """The queue is not known to asyncq."""


class QueueNotEmptyError(AsyncqError):
    """The queue still holds tasks; delete it with ``force=True`` to drop them."""


class TaskStateError(AsyncqError):
    """The operation is not allowed while the task is in its current state."""


class LeaseExpiredError(AsyncqError):
    """The worker could not keep the lease of a running task, so another worker may run it."""


class HandlerNotFoundError(AsyncqError):
    """No handler is registered for a task type; the task follows the retry path."""


class DecodeError(AsyncqError):
    """A stored task message could not be decoded; the task is archived with the reason."""


class WorkerStartupError(AsyncqError):
    """``Worker.run``: the worker's ``lifespan`` failed to start (its error is chained as
    ``__cause__``); no task was fetched and the worker stopped."""


class BrokerError(AsyncqError):
    """A Redis operation failed. What it means is decided once, where the broker meets the
    Redis error (``asyncq._broker._redis_errors``); the underlying error stays chained as
    ``__cause__`` for debugging, never to be inspected.

    ``transient``: the connection failed, broke or timed out (Redis down, restarting, loading,
    unreachable), or a Redis Cluster refused the command while failing over (CLUSTERDOWN,
    TRYAGAIN, a slot no master serves yet): the call may or may not have run, and trying again
    later can succeed. False when Redis answered with an error (a script error, out of
    memory...).

    ``refused``: Redis answered with an error that the same call meets however often it is
    tried (a script error, a wrong type), as opposed to an outage or a server that is only for
    now out of memory, busy, read-only or not ready. Never set together with ``transient``."""

    def __init__(self, message: str, *, transient: bool = False, refused: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
        self.refused = refused and not transient


class SkipRetry(Exception):
    """Raise from a handler to archive the task at once, ignoring the retries left."""


class RevokeTask(Exception):
    """Raise from a handler to delete the task without retrying or archiving it."""


class Retry(Exception):
    """Raise from a handler to retry the task after ``delay`` (seconds or timedelta)."""

    def __init__(self, delay: float | timedelta = 0.0, message: str = "") -> None:
        # Validated like the enqueue durations: finite, >= 0, at most 10 000 years.
        seconds = to_seconds(delay, "Retry delay")
        self.delay = seconds
        super().__init__(message or f"retry requested in {seconds:g}s")

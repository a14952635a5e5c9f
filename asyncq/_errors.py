"""The asyncq exception tree: every error a caller or a handler can meet, by category.

    AsyncqError                       root of every error asyncq raises
    ├── RejectedError                 refused: nothing was written or changed
    │   ├── DuplicateTaskError        a unique task with the same key is already queued
    │   ├── TaskIDConflictError       a task with the same id already exists in the queue
    │   ├── TaskStateError            the operation is not allowed in the task's current state
    │   └── QueueNotEmptyError        a queue still holds tasks (delete without force)
    ├── NotFoundError                 (also a LookupError)
    │   ├── TaskNotFoundError         no task with that id in that queue
    │   ├── QueueNotFoundError        the queue is unknown
    │   ├── HandlerNotFoundError      no handler is registered for the task type
    │   └── ResultNotKeptError        Client.result: a large result without retention is gone
    ├── BrokerError                   Redis failed (``transient``/``refused`` say what trying
    │                                 again can do; the redis error is chained as __cause__,
    │                                 for debugging only)
    ├── TaskError                     a task did not succeed, or a run of it failed
    │   ├── TaskFailedError           Client.result: the task was archived, revoked or deleted
    │   │                             (defined beside TaskInfo, which it carries)
    │   ├── LeaseExpiredError         the worker lost the lease of a running task
    │   ├── TaskCancelledError        the task was cancelled on request
    │   ├── ChildProcessDied          a process-run handler's child exited before answering
    │   ├── ProcessHandlerError       a process-run handler's error that could not travel
    │   ├── ResultError               a handler's return value cannot be stored (a ValueError)
    │   ├── LimitKeyError             a limit's key function failed for the task
    │   └── DecodeError               a stored task message could not be decoded
    ├── TimeLimitError                a time limit ran out (also a TimeoutError)
    │   ├── WaitTimeoutError          Client.wait/result/apply: the timeout ran out (carries
    │   │                             the task's last known state; defined beside the wait)
    │   └── SoftTimeLimitExceeded     raised in a process-run handler before its hard limit
    └── WorkerStartupError            Worker.run: the worker's lifespan failed to start

Two of them carry a TaskInfo and are defined beside it (``_model/_info.py``,
``_client/_waiting.py``), because the task model itself raises DecodeError from here; every
other one is defined in this module. A run that passes its timeout or deadline is recorded
with the text ``TimeoutError: ...`` (what a stored error reads; a handler meets only its
cancellation).

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


class RejectedError(AsyncqError):
    """The request was refused and nothing was written or changed: retrying it as it is will
    be refused again until the state that refused it changes."""


class NotFoundError(AsyncqError, LookupError):
    """What the request names (a task, a queue, a handler, a result) does not exist."""


class TaskError(AsyncqError):
    """A task did not succeed, or one run of it failed (the run's error, as recorded)."""


class TimeLimitError(AsyncqError, TimeoutError):
    """A time limit ran out (a wait's timeout, a handler's soft limit)."""


class DuplicateTaskError(RejectedError):
    """A unique task with the same uniqueness key is already queued (its lock has not expired).

    ``task_id`` is the id of the task holding the lock (None if it ended meanwhile), so an
    idempotent endpoint can answer with the task already queued."""

    def __init__(self, message: str, task_id: str | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id


class TaskIDConflictError(RejectedError):
    """A task with the same id already exists in the queue (in any state, archived included)."""


class TaskNotFoundError(NotFoundError):
    """No task with that id exists in that queue."""


class ResultNotKeptError(NotFoundError):
    """``Client.result``: the task succeeded, but its result was too large to travel with the
    completion event (over 64 KiB) and the task had no retention to keep it."""


class QueueNotFoundError(NotFoundError):
    """The queue is not known to asyncq."""


class QueueNotEmptyError(RejectedError):
    """The queue still holds tasks; delete it with ``force=True`` to drop them."""


class TaskStateError(RejectedError):
    """The operation is not allowed while the task is in its current state."""


class LeaseExpiredError(TaskError):
    """The worker could not keep the lease of a running task, so another worker may run it."""


class HandlerNotFoundError(NotFoundError):
    """No handler is registered for a task type; the task follows the retry path."""


class DecodeError(TaskError):
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


class TaskCancelledError(TaskError):
    """The task was cancelled on request (``Client.cancel`` / the inspector)."""


class ChildProcessDied(TaskError, RuntimeError):
    """The child process running a handler exited before answering (a crash, ``os._exit``,
    the kernel's OOM killer): the run's error, retried as any."""


class ProcessHandlerError(TaskError):
    """A process-run handler raised an exception that could not be sent back as itself (it
    does not pickle): its type and text, with the child's traceback."""


class ResultError(TaskError, ValueError):
    """A handler returned a value that cannot be stored as its result (a set, NaN, a string
    with a lone surrogate...): the run counts as failed, with this as its error."""


class LimitKeyError(TaskError):
    """A limit's key function raised for a task (or returned something that is no key)."""


class SoftTimeLimitExceeded(TimeLimitError):
    """Raised inside a process-run handler ``soft_timeout`` seconds before its hard limit, so
    it can save its work or clean up; uncaught, it is the run's error (retried as any)."""


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

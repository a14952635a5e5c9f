"""asyncq: an asyncio-native distributed task queue backed by Redis.

Enqueue with ``Client``, run handlers with ``Worker`` and ``ServeMux``. Every task state change
is one atomic Lua script in Redis; keys are hash-tagged per queue so Redis Cluster works.
"""

from ._client import Client
from ._clock import Clock, FakeClock, SystemClock
from ._errors import (
    AsyncqError,
    BrokerError,
    DecodeError,
    DuplicateTaskError,
    HandlerNotFoundError,
    LeaseExpiredError,
    QueueNotEmptyError,
    QueueNotFoundError,
    Retry,
    RevokeTask,
    SkipRetry,
    TaskIDConflictError,
    TaskNotFoundError,
    TaskStateError,
)
from ._task import Task, TaskInfo, TaskState
from ._worker import Handler, Middleware, ServeMux, Worker, WorkerConfig, default_retry_delay

__version__ = "0.1.0"

__all__ = [
    "AsyncqError",
    "BrokerError",
    "Client",
    "Clock",
    "DecodeError",
    "DuplicateTaskError",
    "FakeClock",
    "Handler",
    "HandlerNotFoundError",
    "LeaseExpiredError",
    "Middleware",
    "QueueNotEmptyError",
    "QueueNotFoundError",
    "Retry",
    "RevokeTask",
    "ServeMux",
    "SkipRetry",
    "SystemClock",
    "Task",
    "TaskIDConflictError",
    "TaskInfo",
    "TaskNotFoundError",
    "TaskState",
    "TaskStateError",
    "Worker",
    "WorkerConfig",
    "__version__",
    "default_retry_delay",
]

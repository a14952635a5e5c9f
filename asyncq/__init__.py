"""asyncq: an asyncio-native distributed task queue backed by Redis.

Enqueue with ``Client``, run handlers with ``Worker`` and ``ServeMux``. Every task state change
is one atomic Lua script in Redis; keys are hash-tagged per queue so Redis Cluster works.
"""

from ._broker import Broker
from ._broker._connection_options import ConnectionOptions
from ._client._client import Client
from ._client._sync import SyncClient
from ._client._waiting import WaitTimeoutError
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
    ResultNotKeptError,
    Retry,
    RevokeTask,
    SkipRetry,
    TaskIDConflictError,
    TaskNotFoundError,
    TaskStateError,
    WorkerStartupError,
)
from ._inspector._inspect_models import (
    ArchiveLimits,
    DailyStats,
    GroupInfo,
    MinuteStats,
    QueueInfo,
    ServerInfo,
    TaskMatches,
    WorkerInfo,
)
from ._inspector._inspector import Inspector
from ._limits import ConcurrencyLimit, Limiter, LimitUse, RateLimit
from ._log_setup import configure_logging
from ._model._events import EventsLost, TaskEvent
from ._model._info import TaskFailedError, TaskInfo, TaskState
from ._model._options import EnqueueOptions
from ._model._task import Task
from ._scheduler import (
    PeriodicTaskConfig,
    PeriodicTaskManager,
    Scheduler,
    SchedulerEntry,
    SchedulerEvent,
)
from ._typed import AsyncTaskDefinition, SyncTaskDefinition, TaskDefinition
from ._worker import Handler, Middleware, ServeMux, Worker, WorkerConfig, default_retry_delay
from ._worker._procpool import SoftTimeLimitExceeded
from ._workflow import (
    Flow,
    WorkflowHandle,
    WorkflowInfo,
    WorkflowState,
    WorkflowStep,
    chain,
    chord,
    group,
)

__version__ = "0.1.0"

__all__ = [
    "ArchiveLimits",
    "AsyncTaskDefinition",
    "AsyncqError",
    "Broker",
    "BrokerError",
    "Client",
    "Clock",
    "ConcurrencyLimit",
    "ConnectionOptions",
    "DailyStats",
    "DecodeError",
    "DuplicateTaskError",
    "EnqueueOptions",
    "EventsLost",
    "FakeClock",
    "Flow",
    "GroupInfo",
    "Handler",
    "HandlerNotFoundError",
    "Inspector",
    "LeaseExpiredError",
    "LimitUse",
    "Limiter",
    "Middleware",
    "MinuteStats",
    "PeriodicTaskConfig",
    "PeriodicTaskManager",
    "QueueInfo",
    "QueueNotEmptyError",
    "QueueNotFoundError",
    "RateLimit",
    "ResultNotKeptError",
    "Retry",
    "RevokeTask",
    "Scheduler",
    "SchedulerEntry",
    "SchedulerEvent",
    "ServeMux",
    "ServerInfo",
    "SkipRetry",
    "SoftTimeLimitExceeded",
    "SyncClient",
    "SyncTaskDefinition",
    "SystemClock",
    "Task",
    "TaskDefinition",
    "TaskEvent",
    "TaskFailedError",
    "TaskIDConflictError",
    "TaskInfo",
    "TaskMatches",
    "TaskNotFoundError",
    "TaskState",
    "TaskStateError",
    "WaitTimeoutError",
    "Worker",
    "WorkerConfig",
    "WorkerInfo",
    "WorkerStartupError",
    "WorkflowHandle",
    "WorkflowInfo",
    "WorkflowState",
    "WorkflowStep",
    "__version__",
    "chain",
    "chord",
    "configure_logging",
    "default_retry_delay",
    "group",
]

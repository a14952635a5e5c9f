"""asyncq: an asyncio-native distributed task queue backed by Redis.

Enqueue with ``Client``, run handlers with ``Worker`` and ``ServeMux``. Every task state change
is one atomic Lua script in Redis; keys are hash-tagged per queue so Redis Cluster works.
"""

__version__ = "0.1.0"

# Not typing.TYPE_CHECKING: importing typing alone costs ~10 ms, and ``import asyncq`` (every
# submodule's first step, the command line's too) imports nothing. Type checkers take any
# ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:  # the real names, for type checkers and IDEs; imported on first use below
    from ._broker import (
        ArchiveLimits,
        Broker,
        ConnectionOptions,
        DailyStats,
        GroupInfo,
        MinuteStats,
        QueueInfo,
        ServerInfo,
        TaskMatches,
        WorkerInfo,
    )
    from ._client._client import Client
    from ._client._sync import SyncClient
    from ._client._waiting import WaitTimeoutError
    from ._clock import Clock, FakeClock, SystemClock
    from ._errors import (
        AsyncqError,
        BrokerError,
        ChildProcessDied,
        DecodeError,
        DuplicateTaskError,
        HandlerNotFoundError,
        LeaseExpiredError,
        LimitKeyError,
        NotFoundError,
        ProcessHandlerError,
        QueueNotEmptyError,
        QueueNotFoundError,
        RejectedError,
        ResultError,
        ResultNotKeptError,
        Retry,
        RevokeTask,
        SkipRetry,
        SoftTimeLimitExceeded,
        TaskCancelledError,
        TaskError,
        TaskIDConflictError,
        TaskNotFoundError,
        TaskStateError,
        TimeLimitError,
        WorkerStartupError,
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

#: Where each public name is defined: imported on first access (PEP 562), so ``import asyncq``
#: and the ``asyncq`` command's start load neither redis-py nor the worker until one is used.
_LAZY: dict[str, str] = {
    "ArchiveLimits": "._broker",
    "AsyncTaskDefinition": "._typed",
    "AsyncqError": "._errors",
    "Broker": "._broker",
    "BrokerError": "._errors",
    "ChildProcessDied": "._errors",
    "Client": "._client._client",
    "Clock": "._clock",
    "ConcurrencyLimit": "._limits",
    "ConnectionOptions": "._broker",
    "DailyStats": "._broker",
    "DecodeError": "._errors",
    "DuplicateTaskError": "._errors",
    "EnqueueOptions": "._model._options",
    "EventsLost": "._model._events",
    "FakeClock": "._clock",
    "Flow": "._workflow",
    "GroupInfo": "._broker",
    "Handler": "._worker",
    "HandlerNotFoundError": "._errors",
    "Inspector": "._inspector._inspector",
    "LeaseExpiredError": "._errors",
    "LimitKeyError": "._errors",
    "LimitUse": "._limits",
    "Limiter": "._limits",
    "Middleware": "._worker",
    "MinuteStats": "._broker",
    "NotFoundError": "._errors",
    "PeriodicTaskConfig": "._scheduler",
    "PeriodicTaskManager": "._scheduler",
    "ProcessHandlerError": "._errors",
    "QueueInfo": "._broker",
    "QueueNotEmptyError": "._errors",
    "QueueNotFoundError": "._errors",
    "RateLimit": "._limits",
    "RejectedError": "._errors",
    "ResultError": "._errors",
    "ResultNotKeptError": "._errors",
    "Retry": "._errors",
    "RevokeTask": "._errors",
    "Scheduler": "._scheduler",
    "SchedulerEntry": "._scheduler",
    "SchedulerEvent": "._scheduler",
    "ServeMux": "._worker",
    "ServerInfo": "._broker",
    "SkipRetry": "._errors",
    "SoftTimeLimitExceeded": "._errors",
    "SyncClient": "._client._sync",
    "SyncTaskDefinition": "._typed",
    "SystemClock": "._clock",
    "Task": "._model._task",
    "TaskCancelledError": "._errors",
    "TaskDefinition": "._typed",
    "TaskError": "._errors",
    "TaskEvent": "._model._events",
    "TaskFailedError": "._model._info",
    "TaskIDConflictError": "._errors",
    "TaskInfo": "._model._info",
    "TaskMatches": "._broker",
    "TaskNotFoundError": "._errors",
    "TaskState": "._model._info",
    "TaskStateError": "._errors",
    "TimeLimitError": "._errors",
    "WaitTimeoutError": "._client._waiting",
    "Worker": "._worker",
    "WorkerConfig": "._worker",
    "WorkerInfo": "._broker",
    "WorkerStartupError": "._errors",
    "WorkflowHandle": "._workflow",
    "WorkflowInfo": "._workflow",
    "WorkflowState": "._workflow",
    "WorkflowStep": "._workflow",
    "chain": "._workflow",
    "chord": "._workflow",
    "configure_logging": "._log_setup",
    "default_retry_delay": "._worker",
    "group": "._workflow",
}


__all__ = [
    "ArchiveLimits",
    "AsyncTaskDefinition",
    "AsyncqError",
    "Broker",
    "BrokerError",
    "ChildProcessDied",
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
    "LimitKeyError",
    "LimitUse",
    "Limiter",
    "Middleware",
    "MinuteStats",
    "NotFoundError",
    "PeriodicTaskConfig",
    "PeriodicTaskManager",
    "ProcessHandlerError",
    "QueueInfo",
    "QueueNotEmptyError",
    "QueueNotFoundError",
    "RateLimit",
    "RejectedError",
    "ResultError",
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
    "TaskCancelledError",
    "TaskDefinition",
    "TaskError",
    "TaskEvent",
    "TaskFailedError",
    "TaskIDConflictError",
    "TaskInfo",
    "TaskMatches",
    "TaskNotFoundError",
    "TaskState",
    "TaskStateError",
    "TimeLimitError",
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


if not TYPE_CHECKING:  # (hidden from type checkers: they see the imports above, and a typo)

    def __getattr__(name: str) -> object:
        """Import a public name from its module on first access and keep it in the package."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    """The module's names and every public one not imported yet (for ``dir()`` and REPLs)."""
    return sorted({*globals(), *__all__})

"""The broker: every Redis interaction of asyncq, one Lua script per task state change.

Layering inside: ``_protocol`` (the Broker, InspectOps and ScheduleOps protocols and their data
types) <- ``_runner`` (ScriptRunner, the one object talking to Redis, with ``_cluster``,
``_resp`` and ``_scripts``) <- ``_calls`` (the transitions' script calls) <- the operation
groups ``_maintenance``, ``_inspect``, ``_schedules`` <- ``_redis`` (RedisBroker composes them).
"""

from ._calls import ARCHIVE_MAX_SIZE
from ._messages import CancelRequest, Handoff, QueueWake, WorkerSignal
from ._ops import LimitOps
from ._protocol import (
    CANCEL_REQUESTED,
    LEASE_KEPT,
    LEASE_LOST,
    Backlog,
    Broker,
    BulkOp,
    EnqueueCode,
    EventFlush,
    FireCode,
    InspectOps,
    NewTask,
    Outcome,
    RawTask,
    RemoveMode,
    ScheduleOps,
    TaskRecord,
    is_broker,
)
from ._redis import RedisBroker

__all__ = ["ARCHIVE_MAX_SIZE", "CANCEL_REQUESTED", "LEASE_KEPT", "LEASE_LOST", "Backlog", "Broker",
           "BulkOp", "EnqueueCode", "EventFlush", "FireCode", "InspectOps", "NewTask", "Outcome",
           "RawTask", "RedisBroker", "RemoveMode", "ScheduleOps", "TaskRecord", "is_broker"]
__all__ += ["CancelRequest", "Handoff", "LimitOps", "QueueWake", "WorkerSignal"]

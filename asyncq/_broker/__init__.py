"""The broker: every Redis interaction of asyncq, one Lua script per task state change.

Layering inside: ``_protocol`` (the Broker protocol and its operation groups ``_ops``, with the
values crossing the seam: ``_values``, ``_messages``, ``_limit_values``) <- ``_runner``
(ScriptRunner, the one object talking to Redis, with ``_cluster``, ``_resp`` and ``_scripts``;
``_redis_errors`` maps every redis-py error to a BrokerError) <- ``_calls`` (the transitions'
script calls) <- the operation groups ``_maintenance``, ``_inspect``, ``_schedules``,
``_limit_ops`` and the listeners ``_listen`` <- ``_redis`` (RedisBroker composes them).
Nothing outside this package imports redis-py (``tests/test_architecture.py`` checks it).
"""

from ._calls import ARCHIVE_MAX_SIZE
from ._messages import CancelRequest, Handoff, QueuesAdded, QueueWake, WorkerSignal
from ._ops import LimitOps
from ._protocol import (
    CANCEL_ENDED,
    CANCEL_MISSING,
    CANCEL_REMOVED,
    CANCEL_REQUESTED,
    CANCEL_RUNNING,
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
__all__ += ["CANCEL_ENDED", "CANCEL_MISSING", "CANCEL_REMOVED", "CANCEL_RUNNING"]
__all__ += ["CancelRequest", "Handoff", "LimitOps", "QueueWake", "QueuesAdded", "WorkerSignal"]

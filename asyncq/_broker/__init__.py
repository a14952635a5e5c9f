"""The broker: every Redis interaction of asyncq, one Lua script per task state change.

Layering inside: ``_protocol`` (the Broker protocol and its operation groups ``_ops``, with the
values crossing the seam, all in one leaf module, ``_values``, public as ``asyncq.<name>``)
<- ``_runner`` (ScriptRunner, the one object talking to Redis, with ``_cluster``, ``_resp``
and ``_scripts``; ``_redis_errors`` maps every redis-py error to a BrokerError) <- ``_calls``
(the transitions' script calls) <- the operation groups ``_maintenance``, ``_inspect``,
``_schedules``, ``_limit_ops`` (with ``_records``, asyncq's encoding of the worker and
scheduler records) and the listeners ``_listen`` <- ``_redis`` (RedisBroker composes them).
Nothing outside this package imports redis-py, and the layers above import this module only,
never a private one of it: what they may use is exported here (``tests/test_architecture.py``
checks both).
"""

from ._calls import ARCHIVE_MAX_AGE_MS, ARCHIVE_MAX_SIZE
from ._connection import (
    ConnectionOptions,
    RedisLike,
    check_reachable,
    connect,
    make_broker,
    open_broker,
)
from ._inspect_values import (
    ArchiveLimits,
    DailyStats,
    GroupInfo,
    MinuteStats,
    PublishedRules,
    QueueInfo,
    ServerInfo,
    TaskMatches,
    WorkerInfo,
    server_info,
    worker_info,
)
from ._limit_ops import QUEUE_SPEC
from ._limit_values import LimitClaim, LimitHold, LimitSpec, LimitUse
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
    AggregationOps,
    Backlog,
    Broker,
    BulkOp,
    Capability,
    DeleteMode,
    EnqueueCode,
    EventFlush,
    FireCode,
    InspectOps,
    MaintenanceOps,
    NewTask,
    Outcome,
    RawTask,
    RunningTaskRecord,
    ScheduleOps,
    SchedulerEntryRecord,
    SchedulerEventRecord,
    TaskRecord,
    UniqueLock,
    WorkerOps,
    WorkerRecord,
    is_broker,
)
from ._redis import RedisBroker
from ._values import TaskMessage
from ._wf_ops import (
    CancelResult,
    Change,
    DropResult,
    NewNode,
    NodeState,
    StepEnd,
    StepInput,
    StepOutcome,
    StoredStep,
    Value,
    WatchState,
    WorkflowOps,
    WorkflowState,
)

__all__ = ["ARCHIVE_MAX_SIZE", "CANCEL_REQUESTED", "LEASE_KEPT", "LEASE_LOST", "Backlog", "Broker",
           "BulkOp", "Capability", "DeleteMode", "EnqueueCode", "EventFlush", "FireCode",
           "InspectOps", "NewTask", "Outcome", "RawTask", "RedisBroker", "ScheduleOps",
           "TaskRecord", "UniqueLock", "is_broker"]
__all__ += ["CANCEL_ENDED", "CANCEL_MISSING", "CANCEL_REMOVED", "CANCEL_RUNNING"]
__all__ += ["CancelRequest", "Handoff", "LimitOps", "QueueWake", "QueuesAdded", "WorkerSignal"]
# The rest of the seam: the groups of the worker's background work and the records it carries.
__all__ += ["AggregationOps", "MaintenanceOps", "RunningTaskRecord", "SchedulerEntryRecord",
            "SchedulerEventRecord", "TaskMessage", "WorkerOps", "WorkerRecord"]
# What the layers above import from the broker (only ever through this module).
__all__ += ["ARCHIVE_MAX_AGE_MS", "QUEUE_SPEC", "ArchiveLimits", "CancelResult", "Change",
            "ConnectionOptions", "DailyStats", "DropResult", "GroupInfo", "LimitClaim",
            "LimitHold", "LimitSpec", "LimitUse", "MinuteStats", "NewNode", "NodeState",
            "PublishedRules", "QueueInfo", "RedisLike", "ServerInfo", "StepEnd", "StepInput",
            "StepOutcome", "StoredStep", "TaskMatches", "Value", "WatchState", "WorkerInfo",
            "WorkflowOps", "WorkflowState", "check_reachable", "connect", "make_broker",
            "open_broker", "server_info", "worker_info"]

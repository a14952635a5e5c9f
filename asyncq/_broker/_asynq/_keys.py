"""Every Redis key, hash field and channel name of Go asynq's layout (``wire=asynq``).

The names are asynq's (``internal/base/base.go``): per-queue keys ``asynq:{<queue>}:...`` share
the queue as a Redis Cluster hash tag, so one script touches one slot. The hash fields marked
"asyncq only" are extra fields Go ignores (it reads ``msg``, ``state``, ``pending_since``,
``unique_key``, ``group`` and ``result`` only).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

from .._keys import DerivedQueueKeys
from .._keys import day_string as day_string  # the daily counters' UTC date: Go's format too
from .._keys import limit_keyset as limit_keyset  # layout-free suffixes: the broker's own
from .._keys import limit_state as limit_state

PREFIX = "asynq"
QUEUES = f"{PREFIX}:queues"  # SET of queue names (Go adds a queue on its first enqueue)
SERVERS = f"{PREFIX}:servers"  # ZSET server-info key -> expiry, Unix s
WORKERS = f"{PREFIX}:workers"  # ZSET workers key -> expiry, Unix s
SCHEDULERS = f"{PREFIX}:schedulers"  # ZSET scheduler-entries key -> expiry, Unix s
CANCEL_CHANNEL = f"{PREFIX}:cancel"  # pub/sub: message = id of the task to cancel
#: Infix of the per-queue keys asyncq adds to asynq's layout (``asynq:{q}:asyncq:...``), keys Go
#: never reads.
ASYNCQ_PART = "asyncq:"
#: asyncq's own registry of queues: a queue found only there holds asyncq-layout data.
ASYNCQ_QUEUES = "asyncq:queues"

# -- fields of the task hash asynq:{q}:t:<id>
F_MSG = "msg"  # protobuf asynq.TaskMessage
F_STATE = "state"
F_PENDING_SINCE = "pending_since"  # Unix ns, only while pending
F_UNIQUE_KEY = "unique_key"
F_GROUP = "group"
F_RESULT = "result"
F_AMSG = "asyncq_msg"  # asyncq only: the asyncq message (JSON) of a task asyncq enqueued
F_OWNER = "owner"  # asyncq only: the server id of the asyncq worker that leased it
F_LEASE_UNTIL = "lease_until"  # asyncq only: the lease score that worker last wrote (Unix s)
F_STARTED_AT = "started_at"  # asyncq only: when its latest run started (Unix ms)
F_RESULT_ENC = "result_enc"  # asyncq only: how ``result`` is encoded ("b" bytes, "j" JSON)
F_TRACEBACK = "traceback"  # asyncq only: the last failure's traceback
#: asyncq only: the last failure's whole text, ``ExcType: message`` (``error_msg`` in ``msg``
#: holds the message alone, as a Go handler's error reads; a message too broken to carry
#: ``error_msg`` has the reason only here)
F_ERROR = "error"
#: asyncq only: the ``started_at`` of the run a cancellation was requested for (the lease
#: renewal of that run reports it; a later run of the task has another ``started_at``)
F_CANCEL = "cancel"

STATES = ("active", "pending", "scheduled", "retry", "archived", "completed", "aggregating")


@dataclass(frozen=True, slots=True)
class AsynqQueueKeys(DerivedQueueKeys):
    """Key names of one queue in asynq's layout; all share the hash tag ``{queue}``."""

    queue: str
    base: str  # asynq:{q}:
    task_prefix: str  # asynq:{q}:t:
    group_prefix: str  # asynq:{q}:g:
    unique_prefix: str  # asynq:{q}:unique:  (also the unused lock name of a non-unique store)
    pending: str
    active: str
    lease: str
    scheduled: str
    retry: str
    archived: str
    completed: str
    paused: str
    processed: str
    failed: str
    groups: str
    aggregation_sets: str

    def unique(self, task_type: str, digest: str) -> str:
        """asynq's uniqueness lock: ``unique:<type>:<md5 hex of the payload>`` (digest '' when
        the task has no payload at all)."""
        return f"{self.unique_prefix}{task_type}:{digest}"

    def unique_by_key(self, key: str) -> str:
        """The lock of a task made unique by an explicit key (an asyncq addition Go never
        writes): ``unique:k:<key>`` — Go's own locks for a type named ``k`` end in 32 hex
        digits or nothing, so only such a key could meet one."""
        return f"{self.unique_prefix}k:{key}"

    def state_key(self, state: str) -> str:
        """The list or sorted set holding tasks of ``state`` (not aggregating)."""
        return {"pending": self.pending, "active": self.active, "scheduled": self.scheduled,
                "retry": self.retry, "archived": self.archived,
                "completed": self.completed}[state]

    @property
    def minutes(self) -> str:
        """LIST ``minute:processed:failed:backlog`` samples, newest first (the dashboard's
        last hour; asyncq only, a key Go never reads)."""
        return self.base + ASYNCQ_PART + "minutes"


@lru_cache(maxsize=4096)
def queue_keys(queue: str) -> AsynqQueueKeys:
    """Key names of ``queue`` (cached per process)."""
    base = f"{PREFIX}:{{{queue}}}:"
    return AsynqQueueKeys(
        queue=queue, base=base, task_prefix=base + "t:", group_prefix=base + "g:",
        unique_prefix=base + "unique:", pending=base + "pending", active=base + "active",
        lease=base + "lease", scheduled=base + "scheduled", retry=base + "retry",
        archived=base + "archived", completed=base + "completed", paused=base + "paused",
        processed=base + "processed", failed=base + "failed", groups=base + "groups",
        aggregation_sets=base + "aggregation_sets",
    )


def server_key(host: str, pid: int, server_id: str) -> str:
    """STRING holding a server's protobuf ServerInfo."""
    return f"{PREFIX}:servers:{{{host}:{pid}:{server_id}}}"


def workers_key(host: str, pid: int, server_id: str) -> str:
    """HASH task id -> protobuf WorkerInfo of a server's running tasks."""
    return f"{PREFIX}:workers:{{{host}:{pid}:{server_id}}}"


def workers_key_of(server_key_name: str) -> str:
    """The workers hash that goes with a server key (``asynq:servers:{h:p:id}`` ->
    ``asynq:workers:{h:p:id}``)."""
    return WORKERS + server_key_name.removeprefix(SERVERS)


def server_key_matches(server_key_name: str, server_id: str) -> bool:
    """Whether a server key is that of server ``server_id`` (the id ends its hash tag)."""
    return server_key_name.startswith(SERVERS + ":{") and server_key_name.endswith(
        f":{server_id}}}")


def server_doc_key(host: str, pid: int, server_id: str) -> str:
    """STRING holding an asyncq worker's own state document (JSON: what the protobuf
    ServerInfo cannot carry); beside ``server_key`` in its slot, a key Go never reads."""
    return server_doc_key_of(server_key(host, pid, server_id))


def server_doc_key_of(key: str) -> str:
    """``server_doc_key`` of the server whose ``server_key`` is ``key``."""
    return key + ":asyncq"



def scheduler_entries_key(scheduler_id: str) -> str:
    """LIST of a scheduler's protobuf SchedulerEntry records."""
    return f"{PREFIX}:schedulers:{{{scheduler_id}}}"


def scheduler_history_key(entry_id: str) -> str:
    """ZSET of an entry's protobuf SchedulerEnqueueEvent records (no hash tag in asynq)."""
    return f"{PREFIX}:scheduler_history:{entry_id}"


def lock_key(queue: str, task_type: str, identity: bytes | None, key: str | None) -> str:
    """A unique task's lock as Go asynq names it: ``unique:<type>:<md5 of the payload>`` (the
    payload's identity bytes: the payload itself for bytes, so exactly Go's lock then), or an
    explicit ``unique_key`` asyncq's producer chose, kept apart as ``unique:k:<key>``."""
    qk = queue_keys(queue)
    if key is not None:
        return qk.unique_by_key(key)
    digest = "" if identity is None else hashlib.md5(identity, usedforsecurity=False).hexdigest()
    return qk.unique(task_type, digest)


# -- asyncq's additions (events, wake-ups, one-hop pickup, completion marks): keys Go never
# reads, all below asynq:{q}:asyncq: (the queue's hash tag, so a script still touches one slot)
# and all expiring on their own, so nothing of them outlives a queue Go's Inspector removed.

#: pub/sub: an idle asyncq worker of the queue named in the message may dequeue (asyncq only).
WAKE_CHANNEL = f"{PREFIX}:asyncq:wake"
#: pub/sub: names joined by newlines that asyncq just added to QUEUES (Go's client announces
#: nothing: an asyncq worker serving a pattern finds those by reading QUEUES).
NEW_QUEUES_CHANNEL = f"{PREFIX}:asyncq:new-queues"


@dataclass(frozen=True, slots=True)
class AsyncqExtraKeys:
    """asyncq-only keys of one queue in asynq's layout. The scripts derive them from the queue's
    base (``asynq:{q}:`` .. ``asyncq:`` .. suffix, see ``lua/_asynq_lib.lua``)."""

    queue: str
    base: str  # asynq:{q}:asyncq:
    listening: str  # STRING '1' with a TTL: some client listens, so the scripts publish events
    events: str  # shard channel: the queue's task events (asyncq's event format)
    waiters: str  # STRING '1' with a TTL: an idle asyncq worker wants a wake-up
    idle: str  # ZSET '<lease ms>:<owner>' -> when the registration lapses, Unix ms (with a TTL)
    marks: str  # ZSET task id -> completed at, Unix ms: completion marks (with a TTL)

    def handoff(self, owner: str) -> str:
        """HASH id -> '<pending_since ns>:<handed at ms>': tasks handed off to ``owner`` in one
        hop, returned by its next dequeue when their message was lost (with a TTL)."""
        return f"{self.base}handoff:{owner}"

    def handoff_channel(self, owner: str) -> str:
        """Shard channel of the tasks handed off to ``owner``."""
        return f"{self.base}to:{owner}"


@lru_cache(maxsize=4096)
def extra_keys(queue: str) -> AsyncqExtraKeys:
    """asyncq's additional key names of ``queue`` (cached per process)."""
    base = f"{queue_keys(queue).base}asyncq:"
    return AsyncqExtraKeys(queue=queue, base=base, listening=base + "listening",
                           events=base + "events", waiters=base + "waiters",
                           idle=base + "idle", marks=base + "marks")

# -- asyncq's additions, in keys Go never reads: ``asynq:{<queue>}:asyncq:...`` (the queue's
#    hash tag, so a script touching them and the queue's own keys runs on Redis Cluster too;
#    no Go key of a queue starts with ``asyncq:``, and Go never scans a queue's keys)

def asyncq_base(queue: str) -> str:
    """Prefix of the asyncq-only keys of ``queue``: ``asynq:{<queue>}:asyncq:``."""
    return queue_keys(queue).base + "asyncq:"


def scheduler_ticks_key(queue: str) -> str:
    """ZSET entry id -> last claimed tick (Unix ms) of the periodic entries firing into
    ``queue``: asyncq's exactly-once-per-tick claim (Go's scheduler has none)."""
    return asyncq_base(queue) + "scheduler_ticks"


def limits_registry(queue: str) -> str:
    """HASH ``<c|r>:<name>`` -> the limit as last declared (``n`` or ``n/period_ms/burst``)."""
    return asyncq_base(queue) + "limits"


def limit_base(queue: str, kind: str, name: str) -> str:
    """Prefix of one limit's keys: ``asynq:{queue}:asyncq:limit:<c|r>:<name length>:<name>:``
    (the length keeps a name holding ':' apart from a key value)."""
    return f"{asyncq_base(queue)}limit:{kind[0]}:{len(name.encode())}:{name}:"


def scheduler_id_of(entries_key: str) -> str:
    """The scheduler id in an entries key ``asynq:schedulers:{<id>}`` ('' for another key)."""
    head = f"{SCHEDULERS}:{{"
    if entries_key.startswith(head) and entries_key.endswith("}"):
        return entries_key[len(head):-1]
    return ""

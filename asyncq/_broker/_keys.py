"""Every Redis key and channel name asyncq uses.

Per-queue keys carry the queue name as a Redis Cluster hash tag (``asyncq:{queue}:...``) so that
every key a Lua script touches for one queue lives in the same slot.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

# (validate_queue_name re-exported: the rule every per-queue key name relies on)
from .._validate import validate_queue_name as validate_queue_name
from .._validate import workflow_queue

PREFIX = "asyncq"
QUEUES = f"{PREFIX}:queues"  # SET of known queue names
SERVERS = f"{PREFIX}:servers"  # ZSET server key -> expiry ms
WORKERS = f"{PREFIX}:workers"  # ZSET workers key -> expiry ms
SCHEDULERS = f"{PREFIX}:schedulers"  # ZSET scheduler entries key -> expiry ms
CANCEL_CHANNEL = f"{PREFIX}:cancel"  # pub/sub: message = task id to cancel
CANCEL_MARKER_TTL_MS = 3_600_000  # how long a cancellation waits for the worker to see it
WAKE_CHANNEL = f"{PREFIX}:wake"  # pub/sub: message = queue name that has new pending work
# pub/sub: message = names joined by newlines, just added to QUEUES (what a worker serving a
# queue pattern listens for, to serve a matching new queue at once)
NEW_QUEUES_CHANNEL = f"{PREFIX}:new-queues"
TASK_KEY_PATTERN = f"{PREFIX}:{{*}}:t:*"  # SCAN match for the task hashes of every queue
WORKFLOWS = f"{PREFIX}:workflows"  # ZSET workflow id -> created at, Unix ms

DAY_MS = 86_400_000  # one UTC day: the period of the daily counters


class DerivedQueueKeys:
    """The keys derived from a queue's key names, alike in both layouts: a task's hash, a day's
    counters, a group's waiting tasks and its aggregation sets."""

    __slots__ = ()
    task_prefix: str
    group_prefix: str
    processed: str
    failed: str

    def task(self, task_id: str) -> str:
        return self.task_prefix + task_id

    def processed_day(self, day: str) -> str:
        return f"{self.processed}:{day}"

    def failed_day(self, day: str) -> str:
        return f"{self.failed}:{day}"

    def group(self, group: str) -> str:
        """ZSET of the tasks of ``group`` waiting to be aggregated."""
        return self.group_prefix + group

    def aggregation_set(self, group: str, set_id: str) -> str:
        """ZSET of the tasks of one aggregation set of ``group`` (staged for one handler call)."""
        return f"{self.group_prefix}{group}:{set_id}"


@dataclass(frozen=True, slots=True)
class QueueKeys(DerivedQueueKeys):
    """Key names of one queue; all share the hash tag ``{queue}``."""

    queue: str
    base: str
    task_prefix: str
    group_prefix: str
    cancel_prefix: str  # STRING cancel:<id>: a cancellation of the task's current run was asked
    unused_lock: str  # named where a script takes a uniqueness lock the task has none of
    pending: str
    active: str
    lease: str
    scheduled: str
    retry: str
    archived: str
    archive_limits: str  # HASH max_size, max_age_ms: this queue's archive caps (absent: defaults)
    minutes: str  # LIST 'minute:processed:failed:backlog' samples, newest first (last hour)
    completed: str
    marks: str  # ZSET id -> completed_at: tasks that returned nothing, kept a minute (done.lua)
    paused: str
    waiters: str
    # One-hop pickup: the scripts derive these from the waiters flag's base (asyncq_handoff in
    # lua/_wake_lib.lua): <base>idle, <base>handoff:<owner>, <base>to:<owner>.
    idle: str  # ZSET '<lease ms>:<owner>' -> when the registration lapses: idle workers
    registered: str  # STRING: the queue is in QUEUES (an in-slot marker the store scripts set)
    processed: str
    failed: str
    expired: str  # STRING all-time count of tasks archived unrun because they expired
    groups: str
    aggregation_sets: str
    # Task events: the transition scripts derive these two from the task key prefix
    # (base .. 'listening' / 'events', see asyncq_emit in lua/_lib.lua).
    listening: str  # STRING flag with a TTL: set while some process listens to events
    events: str  # shard channel the transition scripts publish task events on
    # Workflows: the scripts that end a step derive the outbox from the task key prefix too
    # (base .. 'wfout', see lua/_wf_lib.lua).
    wf_outbox: str  # HASH step task id -> its outcome, for the workflow advancer to apply
    wf_idle: str  # STRING flag: an advancer found the outbox empty (publish when it fills)
    wf_wake: str  # pub/sub channel: the outbox got a record while an advancer waited for one
    wf_lock: str  # STRING: the advancer draining the outbox now (its server id), with a TTL

    def cancel(self, task_id: str) -> str:
        """STRING marking that a cancellation of ``task_id``'s current run was requested."""
        return self.cancel_prefix + task_id

    def dequeued(self, owner: str) -> str:
        """HASH remembering ``owner``'s last dequeue request and the tasks it leased."""
        return f"{self.base}dequeued:{owner}"

    def handoff(self, owner: str) -> str:
        """HASH of the tasks handed off to ``owner`` in one hop (id -> pending_since) that its
        next dequeue has not yet confirmed."""
        return f"{self.base}handoff:{owner}"

    def handoff_channel(self, owner: str) -> str:
        """Shard channel on which tasks are handed off to ``owner`` in one hop."""
        return f"{self.base}to:{owner}"

    def unique(self, task_type: str, payload: bytes | None, key: str | None = None) -> str:
        """The uniqueness lock key: an explicit key (``unique:k:<key>``), or one derived from
        type and payload (``unique:t:<type>:<md5 or nothing>``). The two spaces never meet, and
        a derived name reads back unambiguously (it ends in ``:`` or in 32 hex digits)."""
        if key is not None:
            return f"{self.base}unique:k:{key}"
        digest = "" if payload is None else hashlib.md5(payload, usedforsecurity=False).hexdigest()
        return f"{self.base}unique:t:{task_type}:{digest}"

    def state_key(self, state: str) -> str:
        """The list or sorted set holding tasks of ``state`` (not aggregating)."""
        return {
            "pending": self.pending,
            "active": self.active,
            "scheduled": self.scheduled,
            "retry": self.retry,
            "archived": self.archived,
            "completed": self.completed,
        }[state]


@lru_cache(maxsize=4096)
def queue_keys(queue: str) -> QueueKeys:
    """Key names of ``queue`` (cached: computed once per queue per process)."""
    base = f"{PREFIX}:{{{queue}}}:"
    return QueueKeys(
        queue=queue,
        base=base,
        task_prefix=base + "t:",
        group_prefix=base + "g:",
        cancel_prefix=base + "cancel:",
        unused_lock=base + "unique:",
        pending=base + "pending",
        active=base + "active",
        lease=base + "lease",
        scheduled=base + "scheduled",
        retry=base + "retry",
        archived=base + "archived",
        archive_limits=base + "archive_limits",
        minutes=base + "minutes",
        completed=base + "completed",
        marks=base + "marks",
        paused=base + "paused",
        waiters=base + "waiters",
        idle=base + "idle",
        registered=base + "registered",
        processed=base + "processed",
        failed=base + "failed",
        expired=base + "expired",
        groups=base + "groups",
        aggregation_sets=base + "aggregation_sets",
        listening=base + "listening",
        events=base + "events",
        wf_outbox=base + "wfout",
        wf_idle=base + "wfidle",
        wf_wake=base + "wfwake",
        wf_lock=base + "wflock",
    )


@dataclass(frozen=True, slots=True)
class WorkflowKeys:
    """Key names of one workflow; all share the hash tag ``{wf:<id>}``, so its state lives in
    one slot. ``record`` is laid out like a task of queue ``wf:<id>`` (``queue``), so waits and
    task events work for a workflow as for a task."""

    workflow_id: str
    queue: str  # the pseudo-queue wf:<id>
    record: str  # HASH: the workflow's summary, laid out like a task record
    spec: str  # HASH node -> JSON: what each node is (task: queue and id; join: its items)
    succ: str  # HASH node -> "n1,n2,...": the nodes waiting for it
    count: str  # HASH node -> how many of its inputs are not done yet
    state: str  # HASH node -> d done, f failed, x cancelled (absent: not finished)
    results: str  # HASH node -> encoding byte + result bytes of a done task node
    ready: str  # SET nodes whose inputs are done and that may not be released yet

    def all(self) -> list[str]:
        return [self.record, self.spec, self.succ, self.count, self.state, self.results,
                self.ready]


@lru_cache(maxsize=1024)
def workflow_keys(workflow_id: str) -> WorkflowKeys:
    """Key names of workflow ``workflow_id``."""
    queue = workflow_queue(workflow_id)
    base = f"{PREFIX}:{{{queue}}}:"
    return WorkflowKeys(workflow_id=workflow_id, queue=queue, record=base + "t:" + workflow_id,
                        spec=base + "spec", succ=base + "succ", count=base + "count",
                        state=base + "state", results=base + "results", ready=base + "ready")


def day_string(now_ms: int) -> str:
    """UTC date (YYYY-MM-DD) of a Unix-millisecond time, as used by the daily counters."""
    return _day_string(now_ms // DAY_MS)


@lru_cache(maxsize=64)
def _day_string(day: int) -> str:
    """Formatted once per UTC day: every outcome the worker writes needs it."""
    return datetime.fromtimestamp(day * DAY_MS // 1000, tz=UTC).strftime("%Y-%m-%d")


def parse_task_key(key: str) -> tuple[str, str] | None:
    """``asyncq:{queue}:t:<id>`` -> (queue, id); None for any other key."""
    head = PREFIX + ":{"
    if not key.startswith(head):
        return None
    queue, sep, rest = key[len(head):].partition("}:")
    if not sep or not queue or not rest.startswith("t:") or len(rest) == 2:
        return None
    return queue, rest[2:]


def parse_task_key_bytes(key: bytes) -> tuple[str, list[bytes]] | None:
    """A task key whose id is not UTF-8 -> (queue, [raw id]); None if its queue name is not
    UTF-8 either, or it is no task key."""
    head = (PREFIX + ":{").encode()
    queue, sep, rest = key.removeprefix(head).partition(b"}:t:")
    if not key.startswith(head) or not sep or not queue or not rest:
        return None
    try:
        return queue.decode(), [rest]
    except UnicodeDecodeError:
        return None


def server_key(server_id: str) -> str:
    return f"{PREFIX}:servers:{{{server_id}}}"


def server_id_of(key: str) -> str:
    """The server id in a ``server_key``."""
    return key.removeprefix(f"{PREFIX}:servers:")[1:-1]


def workers_key(server_id: str) -> str:
    return f"{PREFIX}:workers:{{{server_id}}}"


def scheduler_entries_key(scheduler_id: str) -> str:
    return f"{PREFIX}:schedulers:{{{scheduler_id}}}"


def scheduler_history_key(entry_id: str) -> str:
    return f"{PREFIX}:scheduler_history:{{{entry_id}}}"


def scheduler_ticks_key(queue: str) -> str:
    """ZSET entry id -> last tick (Unix ms) enqueued into ``queue`` by any scheduler.

    It lives in the queue's hash slot so one script can claim the tick and store the task.
    """
    return queue_keys(queue).base + "scheduler_ticks"


# -- limits (see asyncq/_limits): per queue, so one script can take a slot and defer the task

def limits_registry(queue: str) -> str:
    """HASH ``<kind>:<name>`` -> the limit as last declared (``n`` or ``n/period_ms``)."""
    return queue_keys(queue).base + "limits"


def limit_base(queue: str, kind: str, name: str) -> str:
    """Prefix of one limit's keys: ``asyncq:{queue}:limit:<c|r>:<name length>:<name>:`` (the
    length keeps a name holding ':' apart from a key value)."""
    return f"{queue_keys(queue).base}limit:{kind[0]}:{len(name.encode())}:{name}:"


def limit_keyset(base: str) -> str:
    """SET of the key values a limit has been used with (what ``asyncq limit ls`` lists)."""
    return base + "keys"


def limit_state(base: str, key: str) -> str:
    """Prefix of one key value's state: ``<that>held`` (ZSET holder -> expiry ms),
    ``<that>wait`` (ZSET waiting task -> order or due ms), ``<that>win`` (ZSET of the starts in
    the rate window), ``<that>tat`` (STRING: a rate's theoretical time of the next start, Unix
    ms)."""
    return f"{base}k:{key}:"

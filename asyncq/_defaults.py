"""Every default asyncq applies when the caller says nothing, each named once, here.

The Client, Task, typed tasks, workflows, the worker's settings, the CLI (its flags and help
texts) and the web dashboard read these names instead of spelling the values, so a default
changes in one place and help texts cannot drift from what the code does
(tests/test_defaults.py holds them to it). Durations are seconds unless the name ends in _MS.
This module imports nothing, so any module may read it.
"""

from __future__ import annotations

from typing import Final

# -- a task (Client.enqueue, Task, typed tasks, workflow steps, ``asyncq task enqueue``)

DEFAULT_QUEUE: Final = "default"
"""The queue a task goes to, a worker serves and a lookup by id searches when none is named."""

DEFAULT_MAX_RETRY: Final = 25
"""Retries of a failing task before it is archived (about 18 hours of default backoff)."""

DEFAULT_RETRY_DELAY_MAX: Final = 3600.0
"""The longest wait between two runs of a failing task under the default backoff (1 h): the
delay grows as ``retried**4`` seconds up to it, so the 25 default retries span about a day
(uncapped, they would span three weeks, the last ones days apart)."""

DEFAULT_TIMEOUT_MS: Final = 30 * 60 * 1000
"""A handler's time limit when the task has neither ``timeout`` nor ``deadline`` (30 min);
``timeout=0`` means no limit at all."""

RESULT_RETENTION: Final = 600.0
"""How long a task that returned a value is kept with it (10 min) when neither its producer
nor its handler set ``retention``, so ``result()`` after ``enqueue()`` finds it even when the
task finished before anybody listened."""

COMPLETION_MARK: Final = 60.0
"""How long a task that returned nothing (and has no ``retention``) leaves a completion mark:
its id and completion time in its queue's marks (the task itself is deleted) — so
``wait()``/``result()``/``after=`` that start after it ended still learn that it succeeded.
``retention=0`` leaves nothing."""

WORKFLOW_RETENTION: Final = 86_400.0
"""How long an ended workflow's state is kept (1 day): ``enqueue_workflow`` and the one-step
workflow behind ``enqueue(after=...)``."""

# -- the archive (failed tasks kept for inspection), trimmed as tasks are archived

ARCHIVE_MAX_SIZE: Final = 10_000
"""Most archived tasks a queue keeps; the oldest are deleted beyond it."""

ARCHIVE_MAX_AGE_MS: Final = 90 * 86_400_000
"""Archived tasks older than this (90 days) are deleted."""

# -- the inspector

INSPECT_FIND_SCAN: Final = 10_000
"""Most tasks ``Inspector.find_tasks`` examines in one call (a filtered task list): about
10 script calls of 1 000 tasks each, so one search never holds Redis for long."""

TASK_TRACEBACK_MAX: Final = 4096
"""Most bytes of a failed run's traceback stored with the task (its last ones: the frames
nearest the error and the exception line), shown as ``TaskInfo.last_traceback``."""
TASK_TRACEBACK_FRAMES: Final = 30
"""Most frames of each exception of a stored traceback (its innermost ones): formatting a
traceback costs per frame, and a runaway recursion has thousands."""

# -- the client

EVENTS_BUFFER: Final = 10_000
"""Events one ``client.events()`` iterator buffers for a slow reader before it gets an
``EventsLost`` in place of the backlog."""

# -- the worker (WorkerConfig fields of the same name)

WORKER_QUEUES: Final = ((DEFAULT_QUEUE, 1),)
"""Queues a worker serves and their weights: the default queue alone."""

WORKER_CONCURRENCY: Final = 10
WORKER_SHUTDOWN_TIMEOUT: Final = 8.0
WORKER_LEASE_DURATION: Final = 30.0
WORKER_HEARTBEAT_INTERVAL: Final = 5.0
"""Lease renewals and state updates: this often, or a third of the lease if that is shorter."""
WORKER_FORWARD_INTERVAL: Final = 1.0
WORKER_RECOVER_INTERVAL: Final = 10.0
WORKER_RECOVER_GRACE: Final = 5.0
WORKER_WORKFLOW_INTERVAL: Final = 5.0
WORKER_JANITOR_INTERVAL: Final = 8.0
WORKER_JANITOR_BATCH: Final = 100
WORKER_ORPHAN_SCAN_COUNT: Final = 500
WORKER_IDLE_POLL_INTERVAL: Final = 2.0
WORKER_QUEUE_SCAN_INTERVAL: Final = 5.0  # a worker with a queue pattern re-reads the registry
WORKER_DEQUEUE_BATCH: Final = 100
WORKER_CANCEL_GRACE: Final = 5.0
WORKER_TASK_LOGS: Final = "off"
WORKER_UNKNOWN_TYPE: Final = "retry"
WORKER_TRACEBACK_ON: Final = "archive"
WORKER_HEALTH_CHECK_INTERVAL: Final = 15.0
WORKER_GROUP_GRACE_PERIOD: Final = 60.0
WORKER_GROUP_MAX_DELAY: Final = 0.0
WORKER_GROUP_MAX_SIZE: Final = 0
WORKER_STALL_TIMEOUT: Final = 30.0
"""/livez answers 503 once the worker's event loop has not turned for this long."""
WORKER_STALL_WARNING: Final = 1.0
"""A loop turn this long is logged, naming the task that blocked it."""
WORKER_SYNC_HANDLERS: Final = "thread"  # where sync handlers run: "thread" or "process"
WORKER_MAX_TASKS_PER_CHILD: Final = 0  # a handler process is replaced after this many (0: never)
WORKER_MAX_MEMORY_PER_CHILD: Final = 0  # KiB a handler process may keep resident (0: no cap)
WORKER_PROCESS_KILL_GRACE: Final = 1.0  # SIGTERM to SIGKILL of a handler process past its limit
LOOP_WATCH_TICK: Final = 0.25
"""How often the event loop's turning is stamped (a callback) and checked (a thread)."""
HEALTH_HOST: Final = "127.0.0.1"
"""Where ``asyncq worker --health-port`` serves /livez and /readyz: this machine only."""
HEALTH_PROBE_TIMEOUT: Final = 2.0
"""/readyz: how long Redis (and the worker's event loop) may take to answer a ping."""

# -- the scheduler (Scheduler and PeriodicTaskManager arguments of the same name)

SCHEDULER_HEARTBEAT_INTERVAL: Final = 10.0
"""How often a scheduler publishes its entries (they expire after twice this)."""

PERIODIC_SYNC_INTERVAL: Final = 180.0
"""How often a PeriodicTaskManager asks its provider for the configs again."""

# -- the command line and the web dashboard

DEFAULT_REDIS_URL: Final = "redis://127.0.0.1:6379/0"
"""The Redis the CLI talks to without ``--redis-url`` or ``$ASYNCQ_REDIS_URL``."""

WEB_HOST: Final = "127.0.0.1"
"""``asyncq web`` listens on loopback only unless told otherwise."""
WEB_PORT: Final = 8080
WEB_LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1")
"""The ``Host`` names the dashboard always answers (besides ``allowed_hosts``): a browser
sends them only for a page of this machine, never for a DNS-rebinding domain."""
WEB_TITLE: Final = "asyncq"
"""The dashboard's header (``create_app(title=...)``, ``asyncq web --title``)."""
WEB_AUTH_REALM: Final = "asyncq"
"""The realm of the dashboard's basic auth: what a browser's password prompt names."""

METRICS_HOST: Final = "127.0.0.1"
"""Where ``asyncq metrics`` and ``asyncq worker --metrics-port`` serve: this machine only."""
METRICS_PORT: Final = 9090

"""Periodic tasks: Scheduler, PeriodicTaskManager, and the records they publish in Redis.

One module per concern: ``_spec`` (schedule specs and time zones), ``_entry`` (a registration
and its deterministic id), ``_backend`` (Redis writes; how exactly-once-per-tick works),
``_heartbeat`` (publishing entries), ``_store`` (published records and their readers),
``_scheduler`` and ``_periodic`` (the public classes).
"""

from ._periodic import ConfigProvider, PeriodicTaskConfig, PeriodicTaskManager
from ._scheduler import PostEnqueueHook, PreEnqueueHook, Scheduler
from ._store import (
    SchedulerEntry,
    SchedulerEvent,
    list_scheduler_entries,
    list_scheduler_events,
)

__all__ = [
    "ConfigProvider",
    "PeriodicTaskConfig",
    "PeriodicTaskManager",
    "PostEnqueueHook",
    "PreEnqueueHook",
    "Scheduler",
    "SchedulerEntry",
    "SchedulerEvent",
    "list_scheduler_entries",
    "list_scheduler_events",
]

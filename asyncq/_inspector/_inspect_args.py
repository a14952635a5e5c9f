"""What the Inspector accepts and returns besides its models: argument checks, the task
states each operation applies to, and ``ArchivedCount``."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from .._errors import QueueNotEmptyError, TaskNotFoundError, TaskStateError
from .._model._info import STORED_STATES, TaskState


class ArchivedCount(int):
    """What ``archive_all`` returns: the number of tasks archived (an int), with ``trimmed``,
    how many of the oldest archived tasks were deleted to keep the archive within its caps."""

    trimmed: int

    def __new__(cls, archived: int, trimmed: int = 0) -> ArchivedCount:
        value = super().__new__(cls, archived)
        value.trimmed = trimmed
        return value


COUNTER_DAYS = 91  # daily counters live 90 days; one more covers a day boundary


def utc_dates(now_ms: int, days: int) -> list[date]:
    """The UTC date of ``now_ms`` and the ``days - 1`` before it, newest first: the days the
    daily counters are named by."""
    today = datetime.fromtimestamp(now_ms / 1000, tz=UTC).date()
    return [today - timedelta(days=i) for i in range(days)]

DELETABLE = frozenset(s for s in STORED_STATES if s is not TaskState.ACTIVE)
RUNNABLE = frozenset({TaskState.SCHEDULED, TaskState.RETRY, TaskState.ARCHIVED,
                       TaskState.COMPLETED, TaskState.AGGREGATING})
ARCHIVABLE = frozenset({TaskState.PENDING, TaskState.SCHEDULED, TaskState.RETRY,
                         TaskState.COMPLETED, TaskState.AGGREGATING})
QUEUED_STATES = (TaskState.PENDING, TaskState.SCHEDULED, TaskState.RETRY, TaskState.ARCHIVED,
                  TaskState.COMPLETED)


def check_state(state: TaskState | str) -> TaskState:
    try:
        found = TaskState(state)
        if found in STORED_STATES:
            return found
    except ValueError:
        pass
    names = ", ".join(s.value for s in STORED_STATES)
    raise ValueError(f"unknown task state {state!r}; expected one of {names}")


def check_page(page: int, page_size: int) -> None:
    for name, value in (("page", page), ("page_size", page_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def check_task_id(task_id: object) -> str:
    if not isinstance(task_id, str):
        raise TypeError(f"task id must be a str, got {task_id!r}")
    if not task_id.strip():
        raise ValueError("task id must not be blank")
    return task_id


def check_removable(queue: str, code: int, active: int, queued: int, force: bool) -> None:
    """Raise QueueNotEmptyError for what ``remove_queue`` answered (-1 active tasks, -2
    queued ones) when deleting the queue is not allowed."""
    if code in (-1, -2) and not force:
        raise QueueNotEmptyError(
            f"queue {queue!r} is not empty ({queued} queued, {active} active task(s)); "
            "use force to delete the queued tasks")
    if code == -1:
        raise QueueNotEmptyError(
            f"queue {queue!r} has {active} active task(s): wait for them to finish or "
            "cancel them, or recover those whose worker is gone (running tasks are never "
            "deleted, even with force)")


def check_code(code: int, queue: str, task_id: str, wrong_state: dict[int, str]) -> None:
    """Raise for a task operation's reply code: 0 not found, a ``wrong_state`` key its
    state does not allow the operation."""
    if code == 0:
        raise TaskNotFoundError(f"task {task_id!r} not found in queue {queue!r}")
    if code in wrong_state:
        raise TaskStateError(f"task {task_id!r}: {wrong_state[code]}")

#: Why run/archive refuse a workflow step that is not released yet.
WAITING_STEP = ("the task is a workflow step waiting for the steps before it: its workflow "
                "releases it")

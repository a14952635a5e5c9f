"""What the Inspector accepts and returns besides its models: argument checks, the task
states each operation applies to, and ``ArchivedCount``."""

from __future__ import annotations

from ._task import STORED_STATES, TaskState


class ArchivedCount(int):
    """What ``archive_all`` returns: the number of tasks archived (an int), with ``trimmed``,
    how many of the oldest archived tasks were deleted to keep the archive within its caps."""

    trimmed: int

    def __new__(cls, archived: int, trimmed: int = 0) -> ArchivedCount:
        value = super().__new__(cls, archived)
        value.trimmed = trimmed
        return value


COUNTER_DAYS = 91  # daily counters live 90 days; one more covers a day boundary

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

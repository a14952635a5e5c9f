"""The public surface: everything users import comes from ``asyncq`` and is pinned here, so a
name cannot appear or vanish by accident."""

from __future__ import annotations

import asyncq

PUBLIC = {
    "ArchiveLimits",
    # Client/Inspector.cancel: what a cancel did (removed, requested, ended, not found)
    "CancelOutcome",
    "AsyncqError", "Broker", "BrokerError", "Client", "Clock", "ConnectionOptions", "DailyStats",
    "DecodeError", "DuplicateTaskError", "EventsLost", "FakeClock", "GroupInfo", "Handler",
    "HandlerNotFoundError", "Inspector", "LeaseExpiredError", "Middleware", "MinuteStats",
    "PeriodicTaskConfig",
    "PeriodicTaskManager", "QueueInfo", "QueueNotEmptyError", "QueueNotFoundError",
    "ResultNotKeptError", "Retry",
    "RevokeTask", "Scheduler", "SchedulerEntry", "SchedulerEvent", "ServeMux", "ServerInfo",
    "SkipRetry", "SoftTimeLimitExceeded",
    "SystemClock", "Task", "TaskEvent", "TaskFailedError", "TaskIDConflictError",
    "TaskInfo", "TaskMatches", "TaskNotFoundError",
    "TaskState", "TaskStateError", "Worker", "WorkerConfig", "WorkerInfo", "WorkerStartupError",
    # Client.wait/result/apply: a timeout that tells the task's last known state
    "WaitTimeoutError",
    "Flow", "WorkflowHandle", "WorkflowInfo", "WorkflowState", "WorkflowStep", "chain", "chord",
    "group",
    "__version__",
    "configure_logging",
    "default_retry_delay",
    # typed task definitions (@mux.task)
    "AsyncTaskDefinition", "SyncTaskDefinition", "TaskDefinition",
    # the keyword options of enqueue, for type checkers
    "EnqueueOptions",
    # the producer API for synchronous code (a loop thread per process)
    "SyncClient",
    # rate and concurrency limits
    "ConcurrencyLimit", "Limiter", "LimitUse", "RateLimit",
    # the error categories, and the errors a run can end with
    "RejectedError", "NotFoundError", "TaskError", "TimeLimitError", "TaskCancelledError",
    "ChildProcessDied", "ProcessHandlerError", "ResultError", "LimitKeyError",
    # the broker seam: what a broker implements (beside Broker) and the values it exchanges
    "AggregationOps", "InspectOps", "LimitOps", "MaintenanceOps", "ScheduleOps", "WorkerOps",
    "Capability", "TaskMessage", "NewTask", "UniqueLock", "EnqueueCode", "RawTask",
    "TaskRecord", "Outcome", "Backlog", "WorkerRecord", "RunningTaskRecord", "SchedulerEntryRecord",
    "SchedulerEventRecord", "FireCode", "BulkOp", "DeleteMode", "EventFlush", "Handoff",
    "WorkerSignal", "CancelRequest", "QueueWake", "QueuesAdded", "LimitSpec", "LimitClaim",
    "LimitHold",
}


def test_all_is_exactly_the_public_surface() -> None:
    assert set(asyncq.__all__) == PUBLIC
    assert len(asyncq.__all__) == len(PUBLIC)  # no duplicates
    for name in asyncq.__all__:
        assert getattr(asyncq, name) is not None


def test_every_asyncq_error_derives_from_the_root() -> None:
    errors = [getattr(asyncq, n) for n in asyncq.__all__
              if isinstance(getattr(asyncq, n), type) and n.endswith("Error")]
    assert len(errors) >= 10
    assert all(issubclass(e, asyncq.AsyncqError) for e in errors)
    # Handler signals are not failures of asyncq.
    for signal in (asyncq.SkipRetry, asyncq.RevokeTask, asyncq.Retry):
        assert not issubclass(signal, asyncq.AsyncqError)


def _drawn_tree(text: str) -> dict[str, str]:
    """``{class: parent}`` as the tree drawn in ``text`` says (box-drawing lines)."""
    import re

    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        m = re.match(r"^(\s*(?:[│ ]   )*)(?:[├└]── )?([A-Z][A-Za-z]+)\s", line + " ")
        if not m or not ("── " in line or m.group(2) == "AsyncqError"):
            continue
        depth = len(m.group(1).replace("│", " ")) + (4 if "── " in line else 0)
        name = m.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[name] = stack[-1][1]
        stack.append((depth, name))
    return parents


def test_the_drawn_error_tree_is_the_class_tree() -> None:
    """The tree in ``asyncq._errors`` (and the API page) is the classes' real first bases,
    and every public error is in it."""
    from pathlib import Path

    import asyncq._errors as errors

    drawn = _drawn_tree(errors.__doc__ or "")
    public = {n for n in asyncq.__all__ if isinstance(getattr(asyncq, n), type)
              and issubclass(getattr(asyncq, n), asyncq.AsyncqError)} - {"AsyncqError"}
    assert set(drawn) == public
    for name, parent in drawn.items():
        assert getattr(asyncq, name).__bases__[0] is getattr(asyncq, parent), name
    page = (Path(__file__).parents[1] / "docs/reference/api/errors.md").read_text()
    assert _drawn_tree(page) == drawn


def test_error_categories_are_what_callers_catch() -> None:
    """The categories double as the built-in exceptions code already catches."""
    assert issubclass(asyncq.NotFoundError, LookupError)
    assert issubclass(asyncq.TimeLimitError, TimeoutError)
    assert issubclass(asyncq.WaitTimeoutError, TimeoutError)
    assert issubclass(asyncq.ResultError, ValueError)
    assert issubclass(asyncq.ChildProcessDied, RuntimeError)
    for name in ("DuplicateTaskError", "TaskIDConflictError", "TaskStateError",
                 "QueueNotEmptyError"):
        assert issubclass(getattr(asyncq, name), asyncq.RejectedError)


def test_package_is_typed_and_no_module_of_ours_uses_pickle() -> None:
    import ast
    from importlib import resources
    from pathlib import Path

    assert (resources.files("asyncq") / "py.typed").is_file()
    sources = list(Path(asyncq.__file__).parent.rglob("*.py"))
    assert len(sources) > 30
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n.split(".")[0] in {"pickle", "cPickle", "dill", "cloudpickle"}
                           for n in names), f"{path} imports {names}"

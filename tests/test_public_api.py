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

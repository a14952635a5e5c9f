"""Every worker option behaves the same given in Python (``Worker(**options)``) and as the
``asyncq worker`` flag: same value, same defaults, same derived settings."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from asyncq import ServeMux, Worker, WorkerConfig
from asyncq._cli import build_parser
from asyncq._cli._worker_cmd import worker_options

URL = "redis://127.0.0.1:1/0"  # never connected to

#: flag dest -> (flags, the same options in Python). A flag missing from the parser (added by
#: another change later) is skipped; a config flag missing from this table fails the test.
SAMPLES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "concurrency": (["-c", "4"], {"concurrency": 4}),  # derives prefetch
    "queue": (["-q", "a=2", "-q", "b"], {"queues": {"a": 2, "b": 1}}),
    "strict_priority": (["--strict-priority"], {"strict_priority": True}),
    "shutdown_timeout": (["--shutdown-timeout", "1.5"], {"shutdown_timeout": 1.5}),
    "lease_duration": (["--lease-duration", "3"], {"lease_duration": 3}),  # derives heartbeat
    "heartbeat_interval": (["--lease-duration", "10", "--heartbeat-interval", "2"],
                           {"lease_duration": 10, "heartbeat_interval": 2}),
    "log_success": (["--log-success"], {"task_logs": "info"}),
    "burst": (["--burst"], {"burst": True}),
    "forward_interval": (["--forward-interval", "0.5"], {"forward_interval": 0.5}),
    "recover_interval": (["--recover-interval", "3"], {"recover_interval": 3}),
    "recover_grace": (["--recover-grace", "0"], {"recover_grace": 0}),
    "workflow_interval": (["--workflow-interval", "2"], {"workflow_interval": 2}),
    "janitor_interval": (["--janitor-interval", "4"], {"janitor_interval": 4}),
    "janitor_batch": (["--janitor-batch", "7"], {"janitor_batch": 7}),
    "orphan_scan_count": (["--orphan-scan-count", "0"], {"orphan_scan_count": 0}),
    "idle_poll_interval": (["--idle-poll-interval", "0.3"], {"idle_poll_interval": 0.3}),
    "queue_scan_interval": (["--queue-scan-interval", "2"], {"queue_scan_interval": 2}),
    "dequeue_batch": (["--dequeue-batch", "9"], {"dequeue_batch": 9}),
    "prefetch": (["-c", "8", "--prefetch", "0"], {"concurrency": 8, "prefetch": 0}),
    "cancel_grace": (["--cancel-grace", "1"], {"cancel_grace": 1}),
    "task_logs": (["--task-logs", "debug"], {"task_logs": "debug"}),
    "unknown_type": (["--unknown-type", "archive"], {"unknown_type": "archive"}),
    "traceback_on": (["--traceback-on", "failure"], {"traceback_on": "failure"}),
    "health_check_interval": (["--health-check-interval", "2"], {"health_check_interval": 2}),
    "group_grace_period": (["--group-grace-period", "2"], {"group_grace_period": 2}),
    "group_max_delay": (["--group-max-delay", "30"], {"group_max_delay": 30}),
    "group_max_size": (["--group-max-size", "50"], {"group_max_size": 50}),
    "sync_threads": (["--sync-threads", "3"], {"sync_threads": 3}),
    "sync_handlers": (["--sync-handlers", "process"], {"sync_handlers": "process"}),
    "process_pool_size": (["--process-pool-size", "3"], {"process_pool_size": 3}),
    "max_tasks_per_child": (["--max-tasks-per-child", "5"], {"max_tasks_per_child": 5}),
    "max_memory_per_child": (["--max-memory-per-child", "204800"],
                             {"max_memory_per_child": 204800}),
    "process_kill_grace": (["--process-kill-grace", "0.5"], {"process_kill_grace": 0.5}),
    "preload": (["--preload", "json", "--preload", "email.message"],
                {"preload": ("json", "email.message")}),
    "extra": (["--extra", "zone=a", "--extra", "v=2"], {"extra": {"zone": "a", "v": "2"}}),
    "health_port": (["--health-port", "8081"], {"health_port": 8081}),
    "health_host": (["--health-host", "0.0.0.0"], {"health_host": "0.0.0.0"}),
    "stall_timeout": (["--stall-timeout", "5"], {"stall_timeout": 5}),
    "stall_warning": (["--stall-warning", "0"], {"stall_warning": 0}),
}
#: dests of flags that map to a WorkerConfig field under another name
RENAMED = {"queue": "queues", "log_success": "task_logs"}
#: flags whose value cannot be compared in a parity sample (each process differs)
UNCOMPARED = {"server_id"}
FIELDS = {f.name for f in dataclasses.fields(WorkerConfig)}


def _worker_flags() -> dict[str, str]:
    """dest -> first option string, for the worker command's flags."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    worker = sub.choices["worker"]  # type: ignore[index]
    return {a.dest: a.option_strings[0] for a in worker._actions if a.option_strings}


def _from_cli(flags: list[str]) -> WorkerConfig:
    args = build_parser().parse_args(["worker", "app:mux", *flags])
    return Worker(URL, ServeMux(), **worker_options(args), server_id="s").config


def _from_python(options: dict[str, Any]) -> WorkerConfig:
    return Worker(URL, ServeMux(), **options, server_id="s").config


def test_every_config_flag_of_the_worker_command_is_checked_here() -> None:
    config_flags = {dest for dest in _worker_flags() if dest in FIELDS or dest in RENAMED}
    missing = config_flags - set(SAMPLES) - UNCOMPARED
    assert not missing, f"worker flags without a parity sample: add them to SAMPLES: {missing}"


@pytest.mark.parametrize("dest", sorted(SAMPLES))
def test_a_flag_and_its_python_option_give_the_same_worker_config(dest: str) -> None:
    if dest not in _worker_flags():
        pytest.skip(f"the worker command has no flag for {dest} (yet)")
    flags, options = SAMPLES[dest]
    assert _from_cli(flags) == _from_python(options)


def test_defaults_and_derived_settings_are_the_same() -> None:
    assert _from_cli([]) == _from_python({}) == WorkerConfig(server_id="s")
    # The lease alone derives the heartbeat (a third of it) on both sides; nobody is told
    # about a heartbeat_interval they never set.
    assert _from_python({"lease_duration": 3}).heartbeat_interval == 1.0
    assert _from_cli(["--lease-duration", "3"]).heartbeat_interval == 1.0
    assert _from_python({"concurrency": 8}).prefetch == _from_cli(["-c", "8"]).prefetch == 2

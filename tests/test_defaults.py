"""Every default has one home, asyncq/_defaults.py: the Client, Task, typed tasks, workflows,
WorkerConfig, the scheduler, the CLI (flags and help texts) and the web dashboard apply the
values named there, so none of them can drift from it."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

import asyncq
from asyncq import _defaults as D
from asyncq._broker import _calls
from asyncq._cli import build_parser
from asyncq._client._waiting import EventStream
from asyncq._model._message import TaskMessage, decode_message
from asyncq._model._options import NO_OPTIONS, OPTION_NAMES, ParsedOptions, parse_options, resolve
from asyncq._model._rules import COMPLETION_MARK_MS, HandlerRules, apply_rules, kept_for
from asyncq._scheduler._entry import _JSON_FORM, options_from_json, options_to_json
from asyncq._worker import _config
from asyncq._worker._mux import HANDLER_OPTIONS
from asyncq.web import basic_auth, create_app

DEADLINE = datetime(2030, 1, 1, tzinfo=UTC)

# WorkerConfig field -> the _defaults value it starts with.
WORKER_FIELDS: dict[str, object] = {
    "concurrency": D.WORKER_CONCURRENCY,
    "shutdown_timeout": D.WORKER_SHUTDOWN_TIMEOUT,
    "lease_duration": D.WORKER_LEASE_DURATION,
    "forward_interval": D.WORKER_FORWARD_INTERVAL,
    "recover_interval": D.WORKER_RECOVER_INTERVAL,
    "recover_grace": D.WORKER_RECOVER_GRACE,
    "workflow_interval": D.WORKER_WORKFLOW_INTERVAL,
    "janitor_interval": D.WORKER_JANITOR_INTERVAL,
    "janitor_batch": D.WORKER_JANITOR_BATCH,
    "orphan_scan_count": D.WORKER_ORPHAN_SCAN_COUNT,
    "idle_poll_interval": D.WORKER_IDLE_POLL_INTERVAL,
    "queue_scan_interval": D.WORKER_QUEUE_SCAN_INTERVAL,
    "dequeue_batch": D.WORKER_DEQUEUE_BATCH,
    "cancel_grace": D.WORKER_CANCEL_GRACE,
    "task_logs": D.WORKER_TASK_LOGS,
    "unknown_type": D.WORKER_UNKNOWN_TYPE,
    "traceback_on": D.WORKER_TRACEBACK_ON,
    "health_check_interval": D.WORKER_HEALTH_CHECK_INTERVAL,
    "group_grace_period": D.WORKER_GROUP_GRACE_PERIOD,
    "group_max_delay": D.WORKER_GROUP_MAX_DELAY,
    "group_max_size": D.WORKER_GROUP_MAX_SIZE,
    "health_host": D.HEALTH_HOST,
    "stall_timeout": D.WORKER_STALL_TIMEOUT,
    "stall_warning": D.WORKER_STALL_WARNING,
    "sync_handlers": D.WORKER_SYNC_HANDLERS,
    "max_tasks_per_child": D.WORKER_MAX_TASKS_PER_CHILD,
    "max_memory_per_child": D.WORKER_MAX_MEMORY_PER_CHILD,
    "process_kill_grace": D.WORKER_PROCESS_KILL_GRACE,
}


def _default(fn: Any, name: str) -> Any:
    return inspect.signature(fn).parameters[name].default


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _flag(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


def test_worker_config_fields_start_with_the_defaults() -> None:
    config = asyncq.WorkerConfig()
    for name, value in WORKER_FIELDS.items():
        assert getattr(config, name) == value, name
    assert config.queues == dict(D.WORKER_QUEUES) == {D.DEFAULT_QUEUE: 1}
    assert config.heartbeat_interval == min(D.WORKER_HEARTBEAT_INTERVAL,
                                            D.WORKER_LEASE_DURATION / 3)
    assert _config.DEFAULT_HEARTBEAT_INTERVAL == D.WORKER_HEARTBEAT_INTERVAL
    # A new field with a plain value as its default has its home in _defaults too.
    plain = {f.name for f in dataclasses.fields(asyncq.WorkerConfig)
             if isinstance(f.default, int | float | str) and not isinstance(f.default, bool)}
    assert plain == set(WORKER_FIELDS)


def test_a_task_and_the_client_apply_the_task_defaults() -> None:
    task = asyncq.Task("t")
    assert (task.queue, task.max_retry) == (D.DEFAULT_QUEUE, D.DEFAULT_MAX_RETRY)
    for opts in (NO_OPTIONS, ParsedOptions(), parse_options({"group": "g"})):
        # The producer writes only what it was told: the worker applies the handler's
        # registration, else the defaults.
        r = resolve(opts, 1_000)
        assert (r.queue, r.max_retry, r.timeout_ms, r.retention_ms) == (
            D.DEFAULT_QUEUE, None, 0, None)
    msg = decode_message(orjson.dumps({"id": "i", "type": "t", "queue": "q"}))
    assert msg.max_retry is TaskMessage("i", "t", "q").max_retry is None
    assert apply_rules(msg, None) is msg
    assert (msg.max_retry, msg.timeout_ms, msg.retention_ms) == (
        D.DEFAULT_MAX_RETRY, D.DEFAULT_TIMEOUT_MS, None)
    assert kept_for(None, True) == D.RESULT_RETENTION * 1000
    assert kept_for(None, False) is None and COMPLETION_MARK_MS == D.COMPLETION_MARK * 1000
    assert _default(asyncq.Client.events, "queues") == D.DEFAULT_QUEUE
    assert _default(asyncq.Client.events, "buffer") == D.EVENTS_BUFFER
    assert _default(EventStream, "buffer") == D.EVENTS_BUFFER
    assert _default(asyncq.Client.enqueue_workflow, "retention") == D.WORKFLOW_RETENTION
    assert _default(asyncq.Limiter, "queue") == D.DEFAULT_QUEUE
    assert (_calls.ARCHIVE_MAX_SIZE, _calls.ARCHIVE_MAX_AGE_MS) == (
        D.ARCHIVE_MAX_SIZE, D.ARCHIVE_MAX_AGE_MS)
    assert timedelta(milliseconds=D.ARCHIVE_MAX_AGE_MS) == timedelta(days=90)


def test_the_default_backoff_is_capped() -> None:
    """Go asynq's delay (retried**4 + 15 + jitter) until it reaches DEFAULT_RETRY_DELAY_MAX,
    then 0.9 to 1 times the cap (jittered, so tasks that failed together spread out): the 25
    default retries span about 18 hours, not three weeks."""
    cap = D.DEFAULT_RETRY_DELAY_MAX
    task = asyncq.Task("t")
    for retried in range(200):
        delays = [asyncq.default_retry_delay(retried, RuntimeError(), task) for _ in range(50)]
        low = retried**4 + 15
        if low + 29 * (retried + 1) < cap:
            assert all(low <= d <= low + 29 * (retried + 1) for d in delays), retried
        elif low >= cap:
            assert all(0.9 * cap <= d <= cap for d in delays), retried
            assert len(set(delays)) > 10, retried
    assert asyncq.default_retry_delay(10**100, RuntimeError(), task) <= cap
    spans = [sum(asyncq.default_retry_delay(n, RuntimeError(), task)
                 for n in range(D.DEFAULT_MAX_RETRY)) / 3600 for _ in range(20)]
    assert all(16 < span < 19 for span in spans), spans
    assert asyncq.WorkerConfig().retry_delay is asyncq.default_retry_delay


def test_a_scheduler_takes_every_enqueue_option() -> None:
    """A periodic entry's options are stored as JSON: every option has its JSON form, and
    comes back as the same option (an expiry once made ``register`` raise KeyError)."""
    given = {"queue": "q", "max_retry": 1, "timeout": 2, "deadline": DEADLINE,
             "process_in": 3, "expires_in": 4, "unique": 5, "unique_key": "k",
             "task_id": "i", "retention": 6, "group": "g", "headers": {"h": "v"}}
    for options in (given, {"process_at": DEADLINE, "expires_at": DEADLINE}):
        parsed = parse_options(options)
        assert parse_options(options_from_json(options_to_json(parsed))) == parsed
    assert set(_JSON_FORM) == {f.name for f in dataclasses.fields(ParsedOptions)}


def test_typed_tasks_leave_retention_to_the_result_rule() -> None:
    mux = asyncq.ServeMux()

    @mux.task("defaults:value", max_retry=2)
    async def value() -> int:
        return 1

    # Handler options are the registration's, not written by the producer.
    assert "retention" not in value.defaults and "max_retry" not in value.defaults
    assert mux.rules_for("defaults:value") == HandlerRules(max_retry=2)
    assert value.queue == D.DEFAULT_QUEUE


def test_scheduler_intervals_are_the_defaults() -> None:
    assert _default(asyncq.Scheduler, "heartbeat_interval") == D.SCHEDULER_HEARTBEAT_INTERVAL
    assert _default(asyncq.PeriodicTaskManager, "sync_interval") == D.PERIODIC_SYNC_INTERVAL


def test_the_public_options_document_the_defaults() -> None:
    doc = asyncq.EnqueueOptions.__doc__ or ""
    assert f'``queue`` (default "{D.DEFAULT_QUEUE}")' in doc
    assert f"``max_retry`` (default: the handler's, else {D.DEFAULT_MAX_RETRY})" in doc
    assert f"{D.DEFAULT_TIMEOUT_MS // 60_000} min" in doc
    assert f"{D.RESULT_RETENTION / 60:g} min when it returned a value" in doc
    assert f"{D.COMPLETION_MARK / 60:g}-min completion mark" in doc


def test_cli_flags_and_help_texts_show_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCQ_REDIS_URL", raising=False)
    parser = build_parser()
    worker = _subparser(parser, "worker")
    assert _flag(worker, "--redis-url").default == D.DEFAULT_REDIS_URL
    assert D.DEFAULT_REDIS_URL in (_flag(worker, "--redis-url").help or "")
    for flag, value in (("--concurrency", D.WORKER_CONCURRENCY),
                        ("--shutdown-timeout", D.WORKER_SHUTDOWN_TIMEOUT),
                        ("--lease-duration", D.WORKER_LEASE_DURATION),
                        ("--heartbeat-interval", D.WORKER_HEARTBEAT_INTERVAL)):
        assert _flag(worker, flag).default is None  # not given: WorkerConfig's default
        assert re.search(rf"default\b.*(?<![\d.]){value:g}(?![\d.])",
                         _flag(worker, flag).help or ""), flag
    assert f"{D.DEFAULT_QUEUE}=1" in (_flag(worker, "--queue").help or "")
    assert _flag(worker, "--metrics-host").default == D.METRICS_HOST

    enqueue = _subparser(parser, "task", "enqueue")
    assert f"queue {D.DEFAULT_QUEUE}, {D.DEFAULT_MAX_RETRY} retries" in (
        enqueue.description or "")
    assert f"default: the handler's, else {D.DEFAULT_MAX_RETRY})" in (
        _flag(enqueue, "--max-retry").help or "")
    assert f"else {D.DEFAULT_TIMEOUT_MS // 60_000}m)" in (_flag(enqueue, "--timeout").help or "")
    assert f"else {D.RESULT_RETENTION / 60:g}m for" in (_flag(enqueue, "--retention").help or "")

    metrics = _subparser(parser, "metrics")
    assert _flag(metrics, "--host").default == D.METRICS_HOST
    assert _flag(metrics, "--port").default == D.METRICS_PORT


def test_the_web_command_and_app_use_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCQ_REDIS_URL", raising=False)
    web = _subparser(build_parser(), "web")
    assert _flag(web, "--host").default == D.WEB_HOST
    assert _flag(web, "--port").default == D.WEB_PORT
    assert _flag(web, "--title").default == D.WEB_TITLE
    assert _flag(web, "--redis-url").default == D.DEFAULT_REDIS_URL
    assert f"default {D.WEB_PORT}" in (_flag(web, "--port").help or "")
    assert _default(create_app, "title") == D.WEB_TITLE
    assert _default(basic_auth, "realm") == D.WEB_AUTH_REALM


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (or bare strings) of ``tree``."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


def test_only_the_defaults_module_spells_the_default_queue() -> None:
    package = Path(asyncq.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "_defaults.py" and path.parent == package:
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        found += [f"{path.relative_to(package)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value == D.DEFAULT_QUEUE
                  and id(node) not in docs]
    assert found == [], f"spell the default queue as _defaults.DEFAULT_QUEUE: {found}"


def _task_defaults_table() -> dict[str, list[str]]:
    """The rows of the task defaults table of docs/reference/configuration.md, by rule."""
    page = (Path(__file__).parent.parent / "docs/reference/configuration.md").read_text()
    section = page.split("## Task defaults, whatever the door", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")]
            for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| rule ")]
    return {row[0]: row[1:] for row in rows}


def test_the_task_defaults_table_says_what_the_code_does() -> None:
    """One table documents the rules every door shares: its defaults are those of
    _defaults.py, its option names those an enqueue, a registration and a WorkerConfig
    take."""
    table = _task_defaults_table()
    assert list(table) == ["retries", "backoff", "time limit", "result retention", "expiry"]
    assert f"`max_retry` {D.DEFAULT_MAX_RETRY}:" in table["retries"][0]
    assert f"capped at {D.DEFAULT_RETRY_DELAY_MAX / 3600:g} h" in table["backoff"][0]
    assert f"`timeout` {D.DEFAULT_TIMEOUT_MS // 60_000} min" in table["time limit"][0]
    assert f"kept {D.RESULT_RETENTION / 60:g} min" in table["result retention"][0]
    assert f"{D.COMPLETION_MARK / 60:g}-min completion mark" in table["result retention"][0]
    for _, per_task, per_handler, per_worker in table.values():
        assert set(re.findall(r"`(\w+)=", per_task)) - {"delay"} <= OPTION_NAMES
        assert set(re.findall(r"`(\w+)=", per_handler)) <= set(HANDLER_OPTIONS)
        assert {f.name for f in dataclasses.fields(asyncq.WorkerConfig)} >= set(
            re.findall(r"`(\w+)=", per_worker))
    assert asyncq.Retry(delay=5).delay == 5


MIGRATION_PAGES = ("docs/how-to/migrate-celery.md", "docs/how-to/migrate-arq.md")


@pytest.mark.parametrize("page", MIGRATION_PAGES)
def test_the_migration_pages_name_what_exists_and_state_the_defaults(page: str) -> None:
    """The Celery and arq pages map each setting to an asyncq one: every ``asyncq.X`` they
    name exists, every ``asyncq worker`` flag is one the command takes, every ``name=``
    option is an enqueue, handler or worker option, and the defaults they state are those
    of _defaults.py (expiry exists: neither page may say "not yet")."""
    text = (Path(__file__).parent.parent / page).read_text()
    assert "not yet" not in text
    code = " ".join(re.findall(r"`([^`]+)`", text))
    for name in re.findall(r"\basyncq\.([A-Za-z_]+)", code):
        assert name == "contrib" or hasattr(asyncq, name), name
    worker = _subparser(build_parser(), "worker")
    flags = {f for a in worker._actions for f in a.option_strings}
    for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", code):
        if flag not in ("--watch", "--check"):  # (arq's own)
            assert flag in flags, flag
    known = (OPTION_NAMES | set(HANDLER_OPTIONS) | {"limits", "isolate", "soft_timeout"}
             | {f.name for f in dataclasses.fields(asyncq.WorkerConfig)})
    for name in re.findall(r"(?<![\w.])(?<!-q )(?<!--queue )([a-z_]+)=", " ".join(
            cell for line in text.splitlines() if line.startswith("|")
            for cell in line.split("|")[2:])):
        assert name in known or name in ("delay", "timeout"), name
    assert f"{D.RESULT_RETENTION / 60:g} min" in text
    assert f"{D.COMPLETION_MARK / 60:g}-min completion mark" in text
    assert f"capped at {D.DEFAULT_RETRY_DELAY_MAX / 3600:g} h" in text
    assert re.search(rf"\b{D.DEFAULT_MAX_RETRY}\b", text)
    with pytest.raises(TypeError, match="retry_on"):  # (what "retry_jobs = False" once said)
        asyncq.ServeMux().handle("t", lambda task: None, retry_on=())

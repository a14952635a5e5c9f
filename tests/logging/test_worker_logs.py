"""What a real ``asyncq worker --log-format json`` process writes: every line one JSON object
(asyncq's, a handler's structlog and stdlib lines, a library's, a Python warning), the lines
logged inside a handler carrying its task, one short line per retry with the traceback once
at the archive, and the ids of the tasks a shutdown requeued."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncq import Client, Inspector, TaskState, chain
from asyncq.testing import wait_until
from tests.helpers.processes import ROOT, worker_process
from tests.logging.logapp import add

pytestmark = pytest.mark.anyio
APP = "tests.logging.logapp:mux"
ENV = {"PYTHONPATH": str(ROOT)}


def json_lines(log: Path) -> list[dict[str, Any]]:
    """Every line of ``log`` (stdout and stderr of the process), each parsed as one JSON
    object: a line that is not fails the test, naming it."""
    docs = []
    for line in log.read_text().splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}")
        assert isinstance(doc, dict), line
        docs.append(doc)
    return docs


async def stop(proc: Any) -> None:
    proc.send_signal(signal.SIGTERM)
    with anyio.fail_after(20):
        await proc.wait()


async def test_every_line_is_json_and_what_a_handler_logs_names_its_task(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    async with worker_process(asyncq_redis_url, asyncq_queue, log, "--log-level", "debug",
                              "--workflow-interval", "0.5", target=APP, env=ENV) as proc:
        tasks = {kind: await asyncq_client.enqueue(f"log:{kind}", queue=asyncq_queue)
                 for kind in ("async", "sync")}
        flow = await asyncq_client.enqueue_workflow(
            chain(add.s(1, 2).options(queue=asyncq_queue)))
        for info in tasks.values():
            assert (await asyncq_client.wait(info, timeout=20)).state is TaskState.COMPLETED
        assert await flow.result(asyncq_client, timeout=20) == 3
        await wait_until(lambda: b"workflow succeeded" in log.read_bytes(), timeout=10)
        await stop(proc)
    docs = json_lines(log)
    for kind, info in tasks.items():
        task = {"task_id": info.id, "queue": asyncq_queue, "type": f"log:{kind}",
                "retried": 0}
        mine = [d for d in docs if d.get("task_id") == info.id]
        structlog_line = next(d for d in mine if d["event"] == "handler structlog line")
        stdlib_line = next(d for d in mine if d["event"] == f"handler stdlib line from {kind}")
        library_line = next(d for d in mine if d["event"] == "library line")
        assert structlog_line.items() >= {**task, "where": kind, "level": "info"}.items()
        assert stdlib_line.items() >= {**task, "logger": "logapp", "level": "warning"}.items()
        assert library_line.items() >= {**task, "logger": "somelibrary.client"}.items()
        assert all("timestamp" in d for d in (structlog_line, stdlib_line, library_line))
    # A Python warning raised in the (threaded) sync handler is a log line of its task too.
    warned = next(d for d in docs if "a deprecated call" in d["event"])
    assert warned["task_id"] == tasks["sync"].id and warned["logger"] == "py.warnings"
    # The worker's own lines after the run do not inherit a task's context.
    assert all("task_id" not in d for d in docs if d["event"] == "worker stopped")
    # Logged by a module-level logger (the workflow engine's), in the configured format.
    assert any(d["event"] == "workflow succeeded" and d["level"] == "debug" for d in docs)


@pytest.mark.parametrize(("traceback_on", "on_retry", "on_archive"),
                         [(None, 0, 1), ("failure", 1, 1), ("off", 0, 0)])
async def test_a_retry_logs_one_short_line_and_the_archive_the_traceback(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, tmp_path: Path,
    traceback_on: str | None, on_retry: int, on_archive: int,
) -> None:
    log = tmp_path / "worker.log"
    flags = ["--forward-interval", "0.1"]
    if traceback_on is not None:
        flags += ["--traceback-on", traceback_on]
    async with worker_process(asyncq_redis_url, asyncq_queue, log, *flags, target=APP,
                              env=ENV) as proc:
        info = await asyncq_client.enqueue("log:fail", queue=asyncq_queue, max_retry=2)
        assert (await asyncq_client.wait(info, timeout=20)).state is TaskState.ARCHIVED
        await wait_until(lambda: b"task archived" in log.read_bytes(), timeout=10)
        await stop(proc)
    docs = json_lines(log)
    mine = [d for d in docs if d.get("task_id") == info.id]
    retries = [d for d in mine if d["event"] == "task failed; will retry"]
    archived = [d for d in mine if d["event"] == "task archived"]
    assert [d["retried"] for d in retries] == [0, 1]  # one line per retry
    assert [d["retried"] for d in archived] == [2]
    for line in retries:
        assert line["error"] == "ValueError: boom" and 0 <= line["retry_in"] <= 1
        assert line["queue"] == asyncq_queue and line["type"] == "log:fail"
    assert all(("exception" in d) == bool(on_retry) for d in retries)
    assert all(("exception" in d) == bool(on_archive) for d in archived)
    tracebacks = [d for d in docs if "Traceback" in json.dumps(d)]
    assert len(tracebacks) == 2 * on_retry + on_archive
    if on_archive:
        assert "ValueError: boom" in archived[0]["exception"]


async def test_a_shutdown_names_the_tasks_it_requeues(
    asyncq_client: Client, asyncq_inspector: Inspector, asyncq_queue: str,
    asyncq_redis_url: str, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    async with worker_process(asyncq_redis_url, asyncq_queue, log, "--concurrency", "30",
                              "--shutdown-timeout", "0.2", target=APP, env=ENV) as proc:
        infos = [await asyncq_client.enqueue("log:block", queue=asyncq_queue)
                 for _ in range(25)]

        async def all_started() -> bool:
            return all([(await asyncq_inspector.task_info(asyncq_queue, i.id)).result_json()
                        == "started" for i in infos])

        await wait_until(all_started, timeout=20)
        await stop(proc)
    ids = {i.id for i in infos}
    line = next(d for d in json_lines(log)
                if d["event"] == "shutdown timeout reached; requeueing running tasks")
    assert line["count"] == 25
    assert len(line["task_ids"]) == 20 and set(line["task_ids"]) <= ids  # bounded
    for info in infos:
        info = await asyncq_inspector.task_info(asyncq_queue, info.id)
        assert info.state is TaskState.PENDING


async def test_with_tracing_on_a_handlers_lines_carry_its_trace_and_span(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    async with worker_process(asyncq_redis_url, asyncq_queue, log, "--task-logs", "info",
                              target="tests.logging.tracedapp:mux", env=ENV) as proc:
        infos = [await asyncq_client.enqueue(f"log:{kind}", queue=asyncq_queue)
                 for kind in ("async", "sync")]
        for info in infos:
            assert (await asyncq_client.wait(info, timeout=20)).state is TaskState.COMPLETED
        await wait_until(lambda: log.read_text().count("task succeeded") == 2, timeout=10)
        await stop(proc)
    docs = json_lines(log)
    for info in infos:
        mine = [d for d in docs if d.get("task_id") == info.id]
        [done] = [d for d in mine if d["event"] == "task succeeded"]  # the run's own ids
        ids = {"trace_id": done["trace_id"], "span_id": done["span_id"]}
        assert len(ids["trace_id"]) == 32 and len(ids["span_id"]) == 16
        handler_lines = [d for d in mine if d["event"] != "task succeeded"]
        assert {d["event"].split(" from ")[0] for d in handler_lines} >= {
            "handler structlog line", "handler stdlib line", "library line"}
        assert all(d.items() >= ids.items() for d in handler_lines), handler_lines

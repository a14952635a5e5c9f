"""``asyncq scheduler`` as a real process, and ``asyncq scheduler ls|history``."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import asyncq
from asyncq._cli import main
from asyncq._cli._common import CLIError
from asyncq._cli._scheduler_cmd import load_runner
from tests.helpers.cli import Cli, err, js
from tests.helpers.polling import poll_until

DEAD_REDIS = "redis://127.0.0.1:1/0"

APP = '''
import asyncq

QUEUE = {queue!r}


def make(redis_url):
    scheduler = asyncq.Scheduler(redis_url, heartbeat_interval=1)
    scheduler.register("@every 1h", "cli:report", {{"n": 1}}, queue=QUEUE)
    return scheduler


ready_made = asyncq.Scheduler({url!r})
not_a_scheduler = 42


def make_wrong(redis_url):
    return "nope"
'''


def scheduler_ls(cli: Cli, queue: str) -> list[dict[str, Any]]:
    return [e for e in js(cli.sync("scheduler", "ls", "--json"))
            if e["options"].get("queue") == queue]


def test_scheduler_command_publishes_entries_and_exits_0_on_sigterm(
    tmp_path: Path, asyncq_redis_url: str, asyncq_queue: str, cli: Cli,
) -> None:
    (tmp_path / "sched_app.py").write_text(APP.format(queue=asyncq_queue, url=DEAD_REDIS))
    proc = subprocess.Popen(
        [sys.executable, "-m", "asyncq", "scheduler", "sched_app:make",
         "--redis-url", asyncq_redis_url, "--log-format", "json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def published() -> list[dict[str, Any]]:
            assert proc.poll() is None, proc.communicate()[1]
            return scheduler_ls(cli, asyncq_queue)

        [entry] = poll_until(published, timeout=60, message="no entry published")
        assert (entry["spec"], entry["type"], entry["payload"]) == \
            ("@every 1h", "cli:report", {"n": 1})
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
        assert "scheduler stopped" in stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert scheduler_ls(cli, asyncq_queue) == []  # cleared at shutdown


def test_load_runner_accepts_factories_and_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asyncq_queue: str,
) -> None:
    (tmp_path / "loader_app.py").write_text(APP.format(queue=asyncq_queue, url=DEAD_REDIS))
    monkeypatch.chdir(tmp_path)
    made, from_url = load_runner("loader_app:make", DEAD_REDIS)
    assert isinstance(made, asyncq.Scheduler) and from_url
    ready, from_url = load_runner("loader_app:ready_made", "redis://ignored:1/0")
    assert isinstance(ready, asyncq.Scheduler) and not from_url
    for target, message in (("loader_app:not_a_scheduler", "neither"),
                            ("loader_app:make_wrong", "not a Scheduler"),
                            ("no_such_module_xyz:make", "cannot import")):
        with pytest.raises(CLIError, match=message):
            load_runner(target, DEAD_REDIS)


def test_scheduler_command_errors_are_one_line_exit_1(tmp_path: Path) -> None:
    ran = Cli(cwd=tmp_path).sync("scheduler", "no_such_module_xyz:make", "--redis-url",
                                 DEAD_REDIS, ok=False)
    assert err(ran).startswith("asyncq: error: cannot import")


async def _publish(url: str, queue: str) -> tuple[str, list[str]]:
    """A scheduler on a fake clock near now fires 3 times and publishes its entry."""
    clock = asyncq.FakeClock()
    s = asyncq.Scheduler(url, clock=clock, timezone="Europe/Berlin")
    eid = s.register("@every 1s", "cli:history", {"k": "v"}, queue=queue, max_retry=1)
    ids = []
    for _ in range(3):
        clock.advance(1)
        ids += [i.id for i in await s.tick()]
    await s.heartbeat.beat()
    await s.broker.close()
    return eid, ids


def test_scheduler_ls_and_history(
    asyncq_redis_url: str, asyncq_queue: str, capsys: pytest.CaptureFixture[str],
) -> None:
    eid, task_ids = asyncio.run(_publish(asyncq_redis_url, asyncq_queue))
    capsys.readouterr()  # the scheduler's own log lines

    assert main(["scheduler", "ls", "--json", "--redis-url", asyncq_redis_url]) == 0
    [doc] = [d for d in json.loads(capsys.readouterr().out) if d["id"] == eid]
    assert doc["options"] == {"queue": asyncq_queue, "max_retry": 1}
    assert doc["timezone"] == "Europe/Berlin" and doc["payload"] == {"k": "v"}
    assert datetime.fromisoformat(doc["next_enqueue_at"]) > \
        datetime.fromisoformat(doc["prev_enqueue_at"])

    assert main(["scheduler", "ls", "--redis-url", asyncq_redis_url]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:4] == ["ENTRY", "ID", "SPEC", "TIMEZONE"]
    assert any(eid in line and "cli:history" in line for line in table.splitlines())

    assert main(["scheduler", "history", eid, "--json", "--redis-url", asyncq_redis_url]) == 0
    events = json.loads(capsys.readouterr().out)
    assert [e["task_id"] for e in events] == list(reversed(task_ids))
    assert all(datetime.fromisoformat(e["enqueued_at"]).tzinfo == UTC for e in events)

    assert main(["scheduler", "history", eid, "--page", "2", "--size", "2",
                 "--redis-url", asyncq_redis_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["TASK", "ID"] and len(lines) == 3
    assert task_ids[0] in lines[2]

    assert main(["scheduler", "history", "nope", "--redis-url", asyncq_redis_url]) == 0
    assert "no enqueue events" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["scheduler", "ls", "--redis-url", DEAD_REDIS],
    ["scheduler", "history", "x", "--redis-url", DEAD_REDIS],
    ["scheduler", "history", "x", "--page", "0", "--redis-url", DEAD_REDIS],
])
def test_scheduler_ls_errors_are_one_line_exit_1(
    argv: list[str], capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(argv) == 1
    stderr = capsys.readouterr().err
    assert stderr.startswith("asyncq: error: ") and len(stderr.strip().splitlines()) == 1

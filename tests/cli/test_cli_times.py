"""The CLI's task times: ``task inspect`` shows when a task was enqueued, when its latest run
started and ended and how long it ran (or has been running); ``task ls`` shows the time limits
that apply to a run (timeout, deadline) and how long finished runs took."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import orjson
import pytest

from asyncq import Client, FakeClock, Inspector
from asyncq._broker import Outcome, RedisBroker
from asyncq._broker._connection import make_broker
from asyncq._cli._output import print_json, task_doc
from asyncq._cli._task_cmd import print_task
from tests.helpers.cli import Cli, out

pytestmark = pytest.mark.anyio

OWNER = "cli-times"
DEADLINE = datetime(2099, 1, 1, tzinfo=UTC)


@pytest.fixture
async def broker(asyncq_redis_url: str, clock: FakeClock,
                 anyio_backend: object) -> AsyncIterator[RedisBroker]:
    b = make_broker(asyncq_redis_url, clock=clock)
    try:
        yield b
    finally:
        await b.close()


async def run_one(broker: RedisBroker, queue: str, task_id: str, clock: FakeClock,
                  seconds: float, outcome: str) -> None:
    """Lease the oldest pending task (``task_id``) as a worker would, and end it later."""
    raws, _ = await broker.dequeue(queue, 1, OWNER, 60_000, 1000)
    assert [r.id for r in raws] == [task_id]
    clock.advance(seconds)
    end = (Outcome("complete", queue, task_id, retention_ms=3_600_000) if outcome == "complete"
           else Outcome("archive", queue, task_id, error="boom"))
    assert await broker.finish([end], OWNER) == [True]


def fields(text: str) -> dict[str, str]:
    pairs = (line.split(":", 1) for line in text.splitlines())
    return {k.strip(): v.strip() for k, v in pairs}


async def test_inspect_shows_enqueued_started_completed_and_run_time(
    broker: RedisBroker, clock: FakeClock, asyncq_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = Client(broker, clock=clock)
    q = asyncq_queue
    done, failed, running, waiting = [
        (await client.enqueue("t", queue=q, timeout=90)).id for _ in range(4)]
    t0 = clock.now_ms()
    clock.advance(2)
    await run_one(broker, q, done, clock, 2.5, "complete")
    await run_one(broker, q, failed, clock, 0.25, "archive")
    await broker.dequeue(q, 1, OWNER, 60_000, 1000)  # `running` starts
    async with Inspector(broker) as inspector:
        infos = {i: await inspector.task_info(q, i) for i in (done, failed, running, waiting)}
    shown = {}
    for task_id, info in infos.items():
        print_task(info)
        shown[task_id] = fields(capsys.readouterr().out)
    assert {s["enqueued at"] for s in shown.values()} == {clock_text(t0)}
    assert shown[done]["started at"] == clock_text(t0 + 2000)
    assert shown[done]["completed at"] == clock_text(t0 + 4500)
    assert shown[done]["run time"] == "2.5s (completed)"
    assert shown[failed]["run time"] == "0.25s (failed)"
    assert re.fullmatch(r"running for [\d.]+s", shown[running]["run time"]), shown[running]
    assert shown[running]["started at"] == clock_text(t0 + 4750)
    assert (shown[waiting]["started at"], shown[waiting]["run time"]) == ("-", "-")
    print_json(task_doc(infos[done]))
    doc = orjson.loads(capsys.readouterr().out)
    assert (doc["enqueued_at"], doc["started_at"], doc["completed_at"]) == (
        iso(t0), iso(t0 + 2000), iso(t0 + 4500))


def clock_text(ms: int) -> str:
    """A time as ``task inspect`` prints it (to the second, UTC)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S") + "Z"


def iso(ms: int) -> str:
    """A time as ``--json`` writes it."""
    text: str = orjson.loads(orjson.dumps(datetime.fromtimestamp(ms / 1000, UTC),
                                          option=orjson.OPT_UTC_Z))
    return text


async def test_lists_show_the_time_limit_of_a_run_and_how_long_it_ran(
    broker: RedisBroker, clock: FakeClock, asyncq_queue: str, cli: Cli,
) -> None:
    client = Client(broker, clock=clock)
    q = asyncq_queue
    done = (await client.enqueue("t", queue=q, timeout=90)).id
    await run_one(broker, q, done, clock, 1.5, "complete")
    running = (await client.enqueue("t", queue=q, timeout=90)).id
    await broker.dequeue(q, 1, OWNER, 60_000, 1000)
    pending = (await client.enqueue("t", queue=q, timeout=300, deadline=DEADLINE)).id

    async def ls(state: str) -> list[list[str]]:
        lines = out(await cli("task", "ls", "-q", q, "-s", state)).splitlines()
        return [re.split(r"\s{2,}", ln) for ln in [lines[0], *lines[2:]]]

    active = await ls("active")
    assert active[0] == ["ID", "TYPE", "PAYLOAD", "ORPHANED", "RUNNING", "LIMIT"]
    assert active[1][0] == running and active[1][5] == "1m30s"
    assert re.fullmatch(r"[\d.]+s", active[1][4]), active[1]
    waiting = await ls("pending")
    assert waiting[0] == ["ID", "TYPE", "PAYLOAD", "RETRIED", "LIMIT"]
    assert waiting[1][0] == pending
    assert waiting[1][4] == "5m, deadline 2099-01-01 00:00:00Z"
    finished = await ls("completed")
    assert finished[0] == ["ID", "TYPE", "PAYLOAD", "COMPLETED AT", "RAN", "RESULT"]
    assert finished[1][0] == done and finished[1][4] == "1.5s"

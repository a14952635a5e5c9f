"""``asyncq task inspect`` shows a running task's progress report (and keeps showing the last
one once it ended), in human output and ``--json``, as ``task ls --json`` does."""

from __future__ import annotations

import asyncio

import pytest

import asyncq
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.cli import Cli, gather, js, out

pytestmark = pytest.mark.anyio



async def test_task_inspect_shows_the_progress_of_a_run(
    cli: Cli, asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    release = asyncio.Event()
    mux = asyncq.ServeMux()

    @mux.handler("report:build", retention=60)
    async def build(task: asyncq.Task) -> str:
        await task.set_progress(0.375, "page 3 of 8", data={"page": 3, "pages": 8})
        await release.wait()
        return "built"

    async with asyncq_worker(mux, queues={q: 1}), asyncq.Inspector(asyncq_client.broker) as i:
        info = await asyncq_client.enqueue("report:build", queue=q)

        async def reported() -> bool:
            return (await i.task_info(q, info.id)).progress is not None

        await wait_until(reported, message="the report is stored")
        shown, as_json, listed_json = await gather(
            cli("task", "inspect", info.id, "-q", q), cli("task", "inspect", info.id, "--json"),
            cli("task", "ls", "-q", q, "-s", "active", "--json"))
        release.set()
        assert await asyncq_client.result(info, timeout=30) == "built"
        after = await cli("task", "inspect", info.id, "-q", q)
    lines = out(shown).splitlines()
    shown_progress = ["progress:", "38%", "page", "3", "of", "8"]
    assert any(line.split() == shown_progress for line in lines), lines
    assert any(line.startswith("progress data:") and '{"page":3,"pages":8}' in line
               for line in lines), lines
    assert any(line.startswith("progress at:") and line.endswith("Z") for line in lines), lines
    doc = js(as_json)
    assert (doc["state"], doc["progress"], doc["progress_message"], doc["progress_data"]) == (
        "active", 0.375, "page 3 of 8", {"page": 3, "pages": 8})
    assert doc["progress_at"].endswith("Z")
    assert [d["progress"] for d in js(listed_json)] == [0.375]
    # Ended: the last report stays, as the run left it.
    assert any(line.split() == ["progress:", "38%", "page", "3", "of", "8"]
               for line in out(after).splitlines())
    assert "state:" in out(after) and "completed" in out(after)


async def test_task_inspect_says_when_no_progress_was_reported(
    cli: Cli, asyncq_client: asyncq.Client, asyncq_queue: str,
) -> None:
    info = await asyncq_client.enqueue("t", queue=asyncq_queue)
    shown, as_json = await gather(cli("task", "inspect", info.id, "-q", asyncq_queue),
                                  cli("task", "inspect", info.id, "--json"))
    assert any(line.split() == ["progress:", "-"] for line in out(shown).splitlines())
    assert "progress at:" not in out(shown) and "progress data:" not in out(shown)
    doc = js(as_json)
    assert (doc["progress"], doc["progress_message"], doc["progress_data"],
            doc["progress_at"]) == (None, None, None, None)

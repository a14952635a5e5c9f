"""A queue's archive limits are configurable, stored in Redis so that every process applies the
same ones (workers archiving failures, the Inspector, the dashboard, the CLI): setting them
trims at once and says how many went, and the dashboard's confirmation uses them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from asyncq import Client, Inspector, ServeMux, Task
from asyncq.testing import WorkerFactory
from tests.helpers.cli import Cli, out
from tests.web.test_web_archive_cap import _overflow_text
from tests.web.web_helpers import WebFactory, post_action

pytestmark = pytest.mark.anyio


async def _fail(task: Task) -> None:
    raise RuntimeError("no")


async def test_a_queues_archive_caps_apply_to_workers_inspector_and_dashboard(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_worker: WorkerFactory, asyncq_queue: str, cli: Cli) -> None:
    queue = asyncq_queue
    await asyncq_client.enqueue_many([Task("t", i, queue=queue) for i in range(8)])
    assert await asyncq_inspector.archive_all(queue, "pending") == 8
    default = await asyncq_inspector.archive_limits(queue)
    assert (default.max_size, default.max_age, default.custom) == (
        10_000, timedelta(days=90), False)

    # lowering the cap trims at once, oldest first, and says how many went
    assert await asyncq_inspector.set_archive_limits(queue, max_size=5) == 3
    limits = await asyncq_inspector.archive_limits(queue)
    assert (limits.max_size, limits.max_age, limits.custom) == (5, timedelta(days=90), True)
    assert (await asyncq_inspector.queue_info(queue)).archived == 5

    # a worker archiving a failure keeps to it
    mux = ServeMux()
    mux.handle("fails", _fail)
    failed = await asyncq_client.enqueue("fails", None, queue=queue, max_retry=0)
    async with asyncq_worker(mux, queues={queue: 1}) as w:
        await w.wait_drained(queue)
    archived = {t.id for t in await asyncq_inspector.list_tasks(queue, "archived")}
    assert len(archived) == 5 and failed.id in archived

    # the dashboard's confirmation states this queue's limits and what they will delete
    await asyncq_client.enqueue_many([Task("t", i, queue=queue) for i in range(2)])
    async with web() as http:
        confirm = await post_action(http, f"/queue?q={queue}&state=pending", "/action/state",
                                    action="archive", queue=queue, state="pending")
    said = _overflow_text(confirm.text)
    assert "keeps at most 5 tasks, none older than 90.0 d:" in said
    assert "deletes the 2 oldest archived task(s)" in said

    # an age limit: everything archived more than a second ago goes
    assert await asyncq_inspector.set_archive_limits(queue, max_size=5, max_age=0.001) == 5
    # back to the defaults
    assert await asyncq_inspector.set_archive_limits(queue) == 0
    assert not (await asyncq_inspector.archive_limits(queue)).custom
    for bad in ({"max_size": 0}, {"max_age": -1}, {"max_size": True}):
        with pytest.raises((ValueError, TypeError)):
            await asyncq_inspector.set_archive_limits(queue, **bad)  # type: ignore[arg-type]

    said = out(await cli("queue", "archive-limits", queue, "--max-size", "1"))
    assert said.splitlines() == [
        f"queue {queue}: archive keeps at most 1 tasks, none older than 90d"]

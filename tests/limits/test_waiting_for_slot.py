"""A task a full concurrency limit put back is shown as waiting for a slot, not as scheduled
"in ~30 s" (the lease end it is looked at again by, at the latest): it starts as soon as a
slot frees. The same words in the API (``TaskInfo.waiting_for_slot`` / ``limited_by``, the
task and its list row), ``asyncq task ls``, ``asyncq task inspect`` and its ``--json``; the
dashboard shows them too (tests/web/test_web_browser_limits.py)."""

from __future__ import annotations

import pytest

import asyncq
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.cli import Cli, js, out
from tests.limits.test_limits_runtime import Gate

pytestmark = pytest.mark.anyio


async def test_a_task_held_by_the_queue_concurrency_limit_is_waiting_for_a_slot(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    cli: Cli,
) -> None:
    q = asyncq_queue
    gate = Gate()
    async with asyncq.Inspector(asyncq_client.broker) as inspector:
        await inspector.set_queue_concurrency(q, 1)
        plain = await asyncq_client.enqueue("any", queue=q, process_in=600)  # only scheduled
        first = await asyncq_client.enqueue("any", queue=q)
        async with asyncq_worker(gate.hold, queues={q: 1}, concurrency=4) as w:
            await wait_until(lambda: gate.running(1), timeout=30, message="one running")
            waiting = await asyncq_client.enqueue("any", queue=q)

            async def put_back() -> bool:
                info = await inspector.task_info(q, waiting.id)
                return info.state is asyncq.TaskState.SCHEDULED
            await wait_until(put_back, timeout=30, message="the second put back by the limit")

            info = await inspector.task_info(q, waiting.id)
            rows = {t.id: t for t in await inspector.list_tasks(q, "scheduled")}
            ls = out(await cli("task", "ls", "-q", q, "-s", "scheduled", ok=True))
            ls_json = js(await cli("task", "ls", "-q", q, "-s", "scheduled", "--json", ok=True))
            shown = out(await cli("task", "inspect", "-q", q, waiting.id, ok=True))
            shown_json = js(await cli("task", "inspect", "-q", q, waiting.id, "--json", ok=True))
            gate.release.set()
            await w.wait_drained(timeout=30)
        assert gate.started == [first.id, waiting.id]  # it ran once the slot freed

    for got in (info, rows[waiting.id]):
        assert got.waiting_for_slot and got.limited_by == ("queue concurrency limit",)
    plain_row = rows[plain.id]
    assert not plain_row.waiting_for_slot and plain_row.limited_by == ()

    [line] = [ln for ln in ls.splitlines() if waiting.id in ln]
    assert "waiting for a slot (queue concurrency limit)" in line
    [plain_line] = [ln for ln in ls.splitlines() if plain.id in ln]
    assert "waiting for a slot" not in plain_line
    by_id = {d["id"]: d for d in ls_json}
    assert (by_id[waiting.id]["waiting_for_slot"], by_id[waiting.id]["limited_by"]) == (
        True, ["queue concurrency limit"])
    assert (by_id[plain.id]["waiting_for_slot"], by_id[plain.id]["limited_by"]) == (False, [])

    assert "scheduled, waiting for a slot" in shown
    assert "limited by" in shown and "queue concurrency limit" in shown
    assert "as soon as a slot frees" in shown
    assert (shown_json["waiting_for_slot"], shown_json["limited_by"]) == (
        True, ["queue concurrency limit"])

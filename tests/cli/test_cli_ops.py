"""The operations CLI (``asyncq stats|queue|task|group``, ``asyncq worker ls``), run in-process
against the test Redis: ``--json`` output is parsed, human output is checked for its key
lines."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import asyncq
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.cli import Cli, err, gather, js, out
from tests.helpers.dataplane import dead_redis_url

pytestmark = pytest.mark.anyio


async def test_queue_commands(cli: Cli, asyncq_client: asyncq.Client, asyncq_queue: str) -> None:
    q = asyncq_queue
    for n in range(3):
        await asyncq_client.enqueue("t", {"n": n}, queue=q)
    await asyncq_client.enqueue("later", queue=q, process_in=3600)
    ls_json, ls, info_json, info, hist_json, hist = await gather(
        cli("queue", "ls", "--json"), cli("queue", "ls"), cli("queue", "inspect", q, "--json"),
        cli("queue", "inspect", q), cli("queue", "history", q, "--days", "3", "--json"),
        cli("queue", "history", q, "--days", "3"))
    assert q in js(ls_json) and q in out(ls).splitlines()
    [doc] = js(info_json)
    assert (doc["queue"], doc["pending"], doc["scheduled"], doc["size"], doc["paused"]) == (
        q, 3, 1, 4, False)
    assert doc["latency"] >= 0 and doc["memory_usage"] > 0
    text = out(info)
    assert f"Queue {q}" in text and "paused:          no" in text
    assert "PENDING  ACTIVE  SCHEDULED" in text
    assert [d["processed"] for d in js(hist_json)] == [0, 0, 0]
    assert len(js(hist_json)) == 3 and js(hist_json)[0]["queue"] == q
    assert "QUEUE" in out(hist).splitlines()[0] and len(out(hist).splitlines()) == 5

    assert out(await cli("queue", "pause", q)).strip() == f"paused queue {q}"
    assert out(await cli("queue", "pause", q)).strip() == f"queue {q} was already paused"
    assert js(await cli("queue", "inspect", q, "--json"))[0]["paused"] is True
    assert out(await cli("queue", "unpause", q)).strip() == f"unpaused queue {q}"

    assert "not empty" in err(await cli("queue", "delete", q, ok=False))
    assert out(await cli("queue", "delete", q, "--force")).strip() == f"deleted queue {q}"
    assert q not in js(await cli("queue", "ls", "--json"))


async def test_task_enqueue_list_inspect(cli: Cli, asyncq_queue: str) -> None:
    q = asyncq_queue
    pending = js(await cli("task", "enqueue", "-t", "email", "-l", '{"to": "a@b.c"}', "-q", q,
                           "--max-retry", "3", "--timeout", "1m30s", "--json"))
    assert (pending["state"], pending["payload"], pending["max_retry"], pending["timeout"]) == (
        "pending", {"to": "a@b.c"}, 3, 90.0)
    raw = js(await cli("task", "enqueue", "-t", "raw", "-l", "not json", "--bytes", "-q", q,
                       "--task-id", "my-id", "--json"))
    assert (raw["id"], raw["payload"], raw["encoding"]) == ("my-id", "bm90IGpzb24=", "b")
    await cli("task", "enqueue", "-t", "u", "-q", q, "--unique", "1h")
    # Tasks that are not pending, and refused ones, in any order.
    sched_p, at_p, grouped, dup, bad_json, conflict, bad_time = await gather(
        cli("task", "enqueue", "-t", "later", "-q", q, "--process-in", "1h", "--json"),
        cli("task", "enqueue", "-t", "at", "-q", q, "--process-at", "2099-01-01T00:00:00Z",
            "--deadline", "2099-01-02T00:00:00+01:00", "--json"),
        cli("task", "enqueue", "-t", "grouped", "-q", q, "--group", "g1"),
        cli("task", "enqueue", "-t", "u", "-q", q, "--unique", "1h", ok=False),
        cli("task", "enqueue", "-t", "x", "-l", "{oops", "-q", q, ok=False),
        cli("task", "enqueue", "-t", "x", "-q", q, "--task-id", "my-id", ok=False),
        cli("task", "enqueue", "-t", "x", "--process-at", "tomorrow", ok=None))
    sched, at = js(sched_p), js(at_p)
    assert sched["state"] == "scheduled" and at["next_process_at"] == "2099-01-01T00:00:00Z"
    assert at["deadline"] == "2099-01-01T23:00:00Z"
    assert out(grouped).startswith("enqueued task ") and "(state aggregating)" in out(grouped)
    assert "already queued" in err(dup)
    assert "not valid JSON" in err(bad_json)
    assert "already exists" in err(conflict)
    assert bad_time.returncode == 2 and b"RFC 3339" in bad_time.stderr

    ls_json, ls, page2, sched_ls, agg, info_json, info = await gather(
        cli("task", "ls", "-q", q, "-s", "pending", "--json"),
        cli("task", "ls", "-q", q, "-s", "pending"),
        cli("task", "ls", "-q", q, "-s", "pending", "--page", "2", "--size", "1", "--json"),
        cli("task", "ls", "-q", q, "-s", "scheduled"),
        cli("task", "ls", "-q", q, "-s", "aggregating", "-g", "g1", "--json"),
        cli("task", "inspect", "-q", q, pending["id"], "--json"),
        cli("task", "inspect", "-q", q, pending["id"]))
    assert [t["type"] for t in js(ls_json)] == ["email", "raw", "u"]  # processing order
    lines = out(ls).splitlines()
    assert lines[0].split() == ["ID", "TYPE", "PAYLOAD", "RETRIED", "LIMIT"]
    assert any(pending["id"] in ln and '{"to":"a@b.c"}' in ln for ln in lines)
    assert [t["type"] for t in js(page2)] == ["raw"]
    assert "PROCESS AT" in out(sched_ls) and sched["id"] in out(sched_ls)
    assert [t["group"] for t in js(agg)] == ["g1"]
    assert js(info_json)["id"] == pending["id"] and js(info_json)["state"] == "pending"
    assert f"id:              {pending['id']}" in out(info)
    assert "state:           pending" in out(info)

    empty = await cli("task", "ls", "-q", q, "-s", "pending", "--page", "9")
    assert out(empty).strip() == f"no pending tasks in queue {q} (page 9)"
    assert js(await cli("task", "ls", "-q", q, "-s", "retry", "--json")) == []


async def test_task_changes_and_bulk(cli: Cli, asyncq_client: asyncq.Client,
                                     asyncq_queue: str) -> None:
    q = asyncq_queue
    pending = await asyncq_client.enqueue("p", queue=q)
    sched = await asyncq_client.enqueue("s", queue=q, process_in=3600)
    for n in range(4):
        await asyncq_client.enqueue("bulk", {"n": n}, queue=q, process_in=3600)

    assert out(await cli("task", "run", "-q", q, sched.id)).strip() == (
        f"task {sched.id} is now pending")
    assert "already pending" in err(await cli("task", "run", "-q", q, sched.id,
                                              ok=False))
    assert out(await cli("task", "archive", "-q", q, sched.id)).strip() == (
        f"archived task {sched.id}")
    assert "already archived" in err(await cli("task", "archive", "-q", q, sched.id,
                                               ok=False))
    assert out(await cli("task", "delete", "-q", q, sched.id)).strip() == (
        f"deleted task {sched.id}")
    assert "not found" in err(await cli("task", "delete", "-q", q, sched.id, ok=False))

    assert js(await cli("task", "archiveall", "-q", q, "-s", "scheduled", "--json"))[
        "count"] == 4
    assert out(await cli("task", "runall", "-q", q, "-s", "archived")).strip() == (
        "4 archived task(s) made pending")
    assert out(await cli("task", "deleteall", "-q", q, "-s", "pending")).strip() == (
        "5 pending task(s) deleted")
    assert (await cli("task", "runall", "-q", q, "-s", "pending", ok=None)).returncode == 2
    assert [ln.split(":")[0] for ln in out(await cli("task", "cancel", pending.id, "other-id"))
            .splitlines()] == [f"task {pending.id} not found", "task other-id not found"]


async def test_group_server_and_stats(cli: Cli, asyncq_client: asyncq.Client,
                                      asyncq_worker: WorkerFactory, asyncq_queue: str) -> None:
    q = asyncq_queue
    for group, n in (("alpha", 2), ("beta", 1)):
        for _ in range(n):
            await asyncq_client.enqueue("g", queue=q, group=group)
    started = anyio.Event()

    async def handler(task: asyncq.Task) -> None:
        started.set()
        await anyio.Event().wait()  # runs until the worker cancels it

    async with asyncq_worker(handler, queues={q: 1}, heartbeat_interval=0.1,
                             shutdown_timeout=0.5) as w:
        await asyncq_client.enqueue("slow", queue=q)
        with anyio.fail_after(10):
            await started.wait()
        server_id = w.worker.config.server_id

        async def listed() -> dict[str, Any] | None:
            servers = js(await cli("worker", "ls", "--json"))
            return next((s for s in servers if s["id"] == server_id and s["active_workers"]),
                        None)

        server = await wait_until(listed, timeout=15, message="server listed by the CLI")
        assert server["queues"] == {q: 1} and server["active_workers"][0]["task_type"] == "slow"
        groups_json, groups, servers, stats_json, stats = await gather(
            cli("group", "ls", "-q", q, "--json"), cli("group", "ls", "-q", q),
            cli("worker", "ls"), cli("stats", "--json"), cli("stats"))
        await cli("task", "cancel", server["active_workers"][0]["task_id"])
    assert js(groups_json) == [{"group": "alpha", "size": 2}, {"group": "beta", "size": 1}]
    assert out(groups).splitlines()[2].split() == ["alpha", "2"]
    assert any(server_id in ln and f"{q}=1" in ln for ln in out(servers).splitlines())
    doc = js(stats_json)
    mine = [x for x in doc["queues"] if x["queue"] == q]
    assert mine[0]["aggregating"] == 3 and mine[0]["active"] == 1
    assert doc["states"]["aggregating"] >= 3 and "redis_version" in doc["redis"]
    text = out(stats)
    for heading in ("Tasks by state", "Queues", "Redis"):
        assert heading in text.splitlines()
    assert any(ln.split()[:2] == [q, "run"] for ln in text.splitlines() if ln.strip())
    assert out(await cli("group", "ls", "-q", q)).splitlines()[2].split() == ["alpha", "2"]


async def test_errors_are_one_line_with_exit_1(cli: Cli, asyncq_client: asyncq.Client,
                                                asyncq_queue: str) -> None:
    unknown = asyncq_queue + "-nope"
    results = await gather(
        cli("queue", "inspect", unknown, ok=False),
        cli("task", "ls", "-q", unknown, "-s", "pending", ok=False),
        cli("group", "ls", "-q", unknown, ok=False),
        cli("task", "run", "-q", unknown, "x", ok=False),
        cli("queue", "pause", unknown, ok=False))
    for proc in results:
        assert err(proc) == f"asyncq: error: queue '{unknown}' not found"
    await asyncq_client.enqueue("t", queue=asyncq_queue)
    proc = await cli("task", "inspect", "-q", asyncq_queue, "missing", ok=False)
    assert "task 'missing' not found" in err(proc)
    proc = await cli("task", "ls", "-q", asyncq_queue, "-s", "aggregating", ok=False)
    assert "group" in err(proc)
    proc = await cli("task", "ls", "-q", asyncq_queue, "-s", "pending", "--page", "0",
                     ok=False)
    assert "page must be >= 1" in err(proc)
    dead = dead_redis_url()
    for args in (["stats"], ["queue", "ls"], ["task", "enqueue", "-t", "x"]):
        proc = await cli(*args, "--redis-url", dead, ok=False)
        assert f"cannot reach Redis at {dead}" in err(proc)

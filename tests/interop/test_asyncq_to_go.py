"""asyncq's client (``?wire=asynq``) -> Go's asynq server on one Redis: the scenarios of
``interop_scenarios`` with asyncq producing (their Go-client baselines run in
test_go_to_asyncq), and what only this direction has: Go's Inspector reading and changing
tasks asyncq stored, asyncq's Inspector cancelling a task a Go server runs and reading its
result, and asyncq's scheduler entries and their history in Go's Inspector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import interop_scenarios as sc
import pytest
from asyncqpeer import asynq_url
from goharness import GoPrograms

from asyncq import Client, Inspector, Scheduler, TaskNotFoundError, TaskState
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio

HEADERS = {"trace": "abc", "tenant": "\u00e9t\u00e9"}


def asyncq_client(url: str) -> sc.AsyncqProducer:
    return sc.AsyncqProducer(url)


def go_server(go: GoPrograms, url: str, workdir: Path) -> sc.GoConsumer:
    return sc.GoConsumer(go, url, workdir)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_10000_tasks_run_once_with_exact_payloads(asynq_go: GoPrograms, interop_redis: str,
                                                        asyncq_queue: str, workdir: Path) -> None:
    await sc.bulk_exact(asyncq_client(interop_redis), go_server(asynq_go, interop_redis, workdir),
                        asynq_go, interop_redis, asyncq_queue, 10_000)


async def test_payload_bytes_and_headers_exact(asynq_go_each: GoPrograms, interop_redis: str,
                                               asyncq_queue: str, workdir: Path) -> None:
    seen = HEADERS if asynq_go_each.version == "v0.26.0" else {}
    await sc.payload_edges(asyncq_client(interop_redis),
                           go_server(asynq_go_each, interop_redis, workdir), interop_redis,
                           asyncq_queue, HEADERS, seen)


async def test_retried_then_archived(asynq_go: GoPrograms, interop_redis: str, asyncq_queue: str,
                                     workdir: Path) -> None:
    await sc.retried_then_archived(asyncq_client(interop_redis),
                                   go_server(asynq_go, interop_redis, workdir), asynq_go,
                                   interop_redis, asyncq_queue)


async def test_scheduled(asynq_go: GoPrograms, interop_redis: str, asyncq_queue: str,
                         workdir: Path) -> None:
    await sc.scheduled(asyncq_client(interop_redis), go_server(asynq_go, interop_redis, workdir),
                       asynq_go, interop_redis, asyncq_queue)


async def test_unique_and_task_ids(asynq_go_each: GoPrograms, interop_redis: str,
                                   asyncq_queue: str, workdir: Path) -> None:
    await sc.unique_and_task_ids(asyncq_client(interop_redis),
                                 sc.GoProducer(asynq_go_each, interop_redis),
                                 go_server(asynq_go_each, interop_redis, workdir),
                                 interop_redis, asyncq_queue)


async def test_groups(asynq_go: GoPrograms, interop_redis: str, asyncq_queue: str,
                      workdir: Path) -> None:
    await sc.groups(asyncq_client(interop_redis), go_server(asynq_go, interop_redis, workdir),
                    asynq_go, interop_redis, asyncq_queue)


async def test_timeout_and_deadline(asynq_go: GoPrograms, interop_redis: str, asyncq_queue: str,
                                    workdir: Path) -> None:
    await sc.timeout_and_deadline(asyncq_client(interop_redis),
                                  go_server(asynq_go, interop_redis, workdir), asynq_go,
                                  interop_redis, asyncq_queue)


async def test_servers_listed_and_cancel(asynq_go_each: GoPrograms, interop_redis: str,
                                         asyncq_queue: str, workdir: Path) -> None:
    await sc.servers_and_cancel(asyncq_client(interop_redis),
                                go_server(asynq_go_each, interop_redis, workdir), asynq_go_each,
                                interop_redis, asyncq_queue)


async def test_pause(asynq_go: GoPrograms, interop_redis: str, asyncq_queue: str,
                     workdir: Path) -> None:
    await sc.pause(asyncq_client(interop_redis), go_server(asynq_go, interop_redis, workdir),
                   asynq_go, interop_redis, asyncq_queue)


# ---------------------------------------------------------------- this direction only


async def test_go_inspector_reads_and_changes_asyncq_tasks(asynq_go_each: GoPrograms,
                                                           interop_redis: str,
                                                           asyncq_queue: str) -> None:
    go, url, queue = asynq_go_each, interop_redis, asyncq_queue
    wire = asynq_url(url)
    async with Client(wire) as client:
        plain = await client.enqueue("ok:plain", b"\x01\x02", queue=queue, task_id="plain")
        tuned = await client.enqueue("ok:tuned", b"t", queue=queue, task_id="tuned",
                                     max_retry=3, timeout=60, retention=120)
        pending3 = await client.enqueue("ok:third", b"", queue=queue, task_id="third")
        later = [await client.enqueue("ok:later", b"l", queue=queue, process_in=3600,
                                      task_id=f"later{i}") for i in range(2)]
        grouped = [await client.enqueue("ok:member", bytes([i]), queue=queue, group="g",
                                        task_id=f"member{i}") for i in range(2)]
    assert await go.inspect(url, "queues") == [queue]
    info = await go.inspect(url, "queue", "-queue", queue)
    assert (info["size"], info["pending"], info["scheduled"], info["aggregating"],
            info["groups"], info["active"], info["paused"]) == (7, 3, 2, 2, 1, 0, False)

    listed = {t["id"]: t for t in await go.inspect(url, "tasks", "-queue", queue,
                                                    "-state", "pending")}
    assert set(listed) == {plain.id, tuned.id, pending3.id}
    p, t = listed["plain"], listed["tuned"]
    assert (p["type"], p["payload_hex"], p["state"], p["max_retry"], p["timeout_s"],
            p["deadline"], p["group"]) == ("ok:plain", "0102", "pending", 25, 1800.0, None, "")
    assert (t["max_retry"], t["timeout_s"], t["retention_s"]) == (3, 60.0, 120.0)
    scheduled = await go.inspect(url, "tasks", "-queue", queue, "-state", "scheduled")
    assert sorted(x["id"] for x in scheduled) == [x.id for x in later]
    due = later[0].next_process_at
    assert due is not None
    for x in scheduled:
        assert x["next_process_at"] == pytest.approx(due.timestamp(), abs=2)
    members = await go.inspect(url, "tasks", "-queue", queue, "-state", "aggregating",
                               "-group", "g")
    assert sorted((x["id"], x["group"]) for x in members) == [(x.id, "g") for x in grouped]

    # Go's Inspector changes them; asyncq's Inspector sees the change
    await go.inspect(url, "archive", "-queue", queue, "-id", "plain")
    await go.inspect(url, "delete", "-queue", queue, "-id", "later0")
    assert await go.inspect(url, "run-all", "-queue", queue, "-state", "scheduled") == {
        "count": 1}
    async with Inspector(wire) as inspector:
        assert (await inspector.task_info(queue, "plain")).state is TaskState.ARCHIVED
        with pytest.raises(TaskNotFoundError):
            await inspector.task_info(queue, "later0")
        assert (await inspector.task_info(queue, "later1")).state is TaskState.PENDING
        mine = await inspector.queue_info(queue)
        assert (mine.pending, mine.archived, mine.scheduled) == (3, 1, 0)


async def test_asyncq_inspector_cancels_go_task_and_reads_result(asynq_go: GoPrograms,
                                                                 interop_redis: str,
                                                                 asyncq_queue: str,
                                                                 workdir: Path) -> None:
    go, url, queue = asynq_go, interop_redis, asyncq_queue
    wire = asynq_url(url)
    async with Client(wire) as client:
        hang = await client.enqueue("hang", b"h", queue=queue, max_retry=0)
        result = await client.enqueue("result", b"\x00result\xff", queue=queue, retention=60)
    async with (go.server(url, workdir, "-queues", queue, "-concurrency", "2") as server,
                Inspector(wire) as inspector):
        await server.wait_starts(2)
        book = await server.wait_ends(1)
        assert [e["id"] for e in book.ends] == [result.id]

        async def go_listed() -> list[Any] | None:
            mine = [s for s in await inspector.workers() if s.pid == server.pid]
            return mine if mine and mine[0].active_workers else None

        [listed] = await wait_until(go_listed, timeout=15, message="Go server seen by asyncq")
        assert [w.task_id for w in listed.active_workers] == [hang.id]
        assert listed.queues == {queue: 1}

        assert await inspector.cancel(hang.id) == "requested"
        book = await server.wait_ends(2, timeout=15)
        assert {(e["id"], e["outcome"]) for e in book.ends} == {
            (result.id, "ok"), (hang.id, "canceled")}

        async def archived() -> bool:
            return (await inspector.task_info(queue, hang.id)).state is TaskState.ARCHIVED

        await wait_until(archived, timeout=10, message="canceled task archived")
        done = await inspector.task_info(queue, result.id)
        assert (done.state, done.result) == (TaskState.COMPLETED, b"\x00result\xff")
        await server.stop()


async def test_go_inspector_sees_asyncq_scheduler(asynq_go_each: GoPrograms, interop_redis: str,
                                                  asyncq_queue: str, workdir: Path) -> None:
    go, url, queue = asynq_go_each, interop_redis, asyncq_queue
    scheduler = Scheduler(asynq_url(url), heartbeat_interval=1.0)
    entry_id = scheduler.register("@every 1s", "ok:cron", b"tick", queue=queue)
    async with scheduler:
        async def listed() -> list[dict[str, Any]] | None:
            entries = await go.inspect(url, "scheduler-entries")
            return entries or None

        [entry] = await wait_until(listed, timeout=15, message="entry seen by Go")
        assert (entry["id"], entry["spec"], entry["task_type"], entry["payload_hex"]) == (
            entry_id, "@every 1s", "ok:cron", b"tick".hex())
        assert entry["next"] is not None

        async def fired() -> list[dict[str, Any]] | None:
            events = await go.inspect(url, "scheduler-history", "-entry", entry_id)
            return events if len(events) >= 2 else None

        events = await wait_until(fired, timeout=15, message="two firings in Go's history")
    ids = {e["task_id"] for e in events}
    for task_id in ids:
        info = await go.inspect(url, "task", "-queue", queue, "-id", task_id)
        assert (info["type"], info["payload_hex"]) == ("ok:cron", b"tick".hex())
    async with go.server(url, workdir, "-queues", queue) as server:
        pending = (await go.inspect(url, "queue", "-queue", queue))["pending"]
        book = await server.wait_ends(pending)
        await server.stop()
    assert ids <= book.ended_ids()
    assert {(e["type"], e["payload_hex"], e["outcome"]) for e in book.ends} == {
        ("ok:cron", b"tick".hex(), "ok")}


async def test_odd_queue_names(asynq_go: GoPrograms, interop_redis: str, workdir: Path) -> None:
    await sc.odd_queue_names(asyncq_client(interop_redis),
                             go_server(asynq_go, interop_redis, workdir), asynq_go,
                             interop_redis)

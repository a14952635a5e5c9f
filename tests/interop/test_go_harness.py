"""The Go side of the interop harness checked against itself (Go client -> Go server, asynq's
Inspector), for each asynq version built: what the asyncq scenarios rely on — the producer's
TaskInfo, the server's ledger, the inspector's views and actions — is asynq's own behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest
from goharness import (
    DEFAULT_ASYNQ,
    GoPrograms,
    InspectorError,
    gen_payload,
    sha256_hex,
    spec,
)

from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio

SEED = "go-harness"
FAST = ("-delayed-check", "100ms", "-retry-delay", "0s")


async def test_binaries_link_the_version_they_are_built_for(asynq_go_each: GoPrograms) -> None:
    versions = await asynq_go_each.versions()
    assert versions["asynq"] == asynq_go_each.version
    assert versions["build_tag"] == ("" if asynq_go_each.version == DEFAULT_ASYNQ
                                     else "asynq_v024")


async def test_go_producer_to_go_server_ledger_exact(asynq_go_each: GoPrograms, interop_redis: str,
                                                     asyncq_queue: str, workdir: Path) -> None:
    go, queue = asynq_go_each, asyncq_queue
    run = await go.produce(interop_redis, "-n", "100", "-type", "ok", "-queue", queue,
                           "-payload-size", "64", "-seed", SEED, "-concurrency", "4")
    assert run.errors == [] and run.summary["enqueued"] == 100
    assert [e["i"] for e in run.enqueued] == list(range(100))
    for i, task in enumerate(run.tasks):
        assert bytes.fromhex(task["payload_hex"]) == gen_payload(SEED, i, 64)
        assert (task["queue"], task["type"], task["state"]) == (queue, "ok", "pending")
        # the Go client's defaults, which an asyncq peer must honour
        assert (task["max_retry"], task["timeout_s"], task["deadline"]) == (25, 1800.0, None)
    assert (await go.inspect(interop_redis, "queue", "-queue", queue))["pending"] == 100

    async with go.server(interop_redis, workdir, "-queues", f"{queue}=1",
                         "-concurrency", "8") as server:
        book = await server.wait_ends(100)
        await server.stop()
    expected = {t["id"]: sha256_hex(gen_payload(SEED, i, 64)) for i, t in enumerate(run.tasks)}
    runs = book.ends_by_id()
    assert set(runs) == set(expected)
    assert all(len(r) == 1 for r in runs.values()), "a task ran twice"
    assert {i: r[0]["payload_sha256"] for i, r in runs.items()} == expected
    assert book.outcomes() == {"ok": 100}
    assert {e["queue"] for e in book.ends} == {queue}

    info = await go.inspect(interop_redis, "queue", "-queue", queue)
    assert (info["pending"], info["active"], info["processed"], info["failed"]) == (0, 0, 100, 0)
    assert await go.inspect(interop_redis, "queues") == [queue]


async def test_inspector_lists_servers_workers_and_cancels(asynq_go_each: GoPrograms,
                                                           interop_redis: str, asyncq_queue: str,
                                                           workdir: Path) -> None:
    go, queue = asynq_go_each, asyncq_queue
    run = await go.produce(interop_redis, "-n", "2", "-type", "hang", "-queue", queue,
                           "-payload-hex", "00ff10", "-max-retry", "0")
    async with go.server(interop_redis, workdir, "-queues", f"{queue}=3",
                         "-concurrency", "3") as server:
        await server.wait_starts(2)

        async def both_listed() -> list[dict[str, object]] | None:
            servers = await go.inspect(interop_redis, "servers")
            mine = [s for s in servers if s["pid"] == server.pid]
            if mine and len(mine[0]["active_workers"]) == 2:
                return mine
            return None

        [listed] = await wait_until(both_listed, timeout=15, message="workers listed")
        assert (listed["concurrency"], listed["queues"], listed["status"]) == (
            3, {queue: 3}, "active")
        assert sorted(w["task_id"] for w in listed["active_workers"]) == sorted(run.ids)
        assert {(w["task_type"], w["payload_hex"], w["queue"])
                for w in listed["active_workers"]} == {("hang", "00ff10", queue)}
        active = await go.inspect(interop_redis, "tasks", "-queue", queue, "-state", "active")
        assert sorted(t["id"] for t in active) == sorted(run.ids)

        victim, other = run.ids
        assert await go.inspect(interop_redis, "cancel", "-id", victim) is None
        book = await server.wait_ends(1)
        [end] = book.ends
        assert (end["id"], end["outcome"]) == (victim, "canceled")

        async def archived() -> dict[str, object] | None:
            task = await go.inspect(interop_redis, "task", "-queue", queue, "-id", victim)
            return task if task["state"] == "archived" else None

        task = await wait_until(archived, timeout=15, message="canceled task archived")
        assert "context canceled" in str(task["last_err"])
        # the other one still runs; deleting it from under the server is refused
        with pytest.raises(InspectorError) as refused:
            await go.inspect(interop_redis, "delete", "-queue", queue, "-id", other)
        assert refused.value.kind == "other"
        await go.inspect(interop_redis, "cancel", "-id", other)
        await server.wait_ends(2)
        await server.stop()
    with pytest.raises(InspectorError) as missing:
        await go.inspect(interop_redis, "task", "-queue", queue, "-id", "no-such-task")
    assert missing.value.kind == "task_not_found"


async def test_handler_behaviours_and_task_states(asynq_go_each: GoPrograms, interop_redis: str,
                                                  asyncq_queue: str, workdir: Path) -> None:
    """fail -> retried then archived; failn:2 -> two failures then success; skip -> archived
    after one run; result -> completed with the payload as result; sleep under a timeout ->
    deadline exceeded."""
    go, queue = asynq_go_each, asyncq_queue
    specs = [
        spec("fail", queue=queue, max_retry=2, task_id="fail", payload=b"f"),
        spec("failn:2", queue=queue, max_retry=5, task_id="failn", payload=b"n"),
        spec("skip", queue=queue, max_retry=5, task_id="skip", payload=b"s"),
        spec("result", queue=queue, retention=60, task_id="result", payload=b"\x00res\xff"),
        # (asynq stores whole seconds: a Timeout under 1 s would be stored as none)
        spec("sleep:10000", queue=queue, timeout=1, max_retry=0, task_id="slow"),
    ]
    run = await go.produce(interop_redis, specs=specs)
    assert run.errors == [] and run.ids == ["fail", "failn", "skip", "result", "slow"]
    async with go.server(interop_redis, workdir, "-queues", queue, *FAST) as server:
        book = await server.wait_ends(3 + 3 + 1 + 1 + 1)
        await server.stop()
    runs = book.ends_by_id()
    assert [(r["retried"], r["outcome"]) for r in runs["fail"]] == [
        (0, "error"), (1, "error"), (2, "error")]
    assert [(r["retried"], r["outcome"]) for r in runs["failn"]] == [
        (0, "error"), (1, "error"), (2, "ok")]
    assert [r["outcome"] for r in runs["skip"]] == ["skip"]
    assert [r["outcome"] for r in runs["result"]] == ["ok"]
    assert [r["outcome"] for r in runs["slow"]] == ["deadline_exceeded"]
    # (about the 1 s timeout: Go's server sets the context's deadline from its wall clock when
    # it starts the task, the program times the handler on its own clock a moment later)
    assert 0.9 <= runs["slow"][0]["elapsed_s"] < 9  # stopped, not the 10 s run

    async def state(task_id: str) -> dict[str, object]:
        info: dict[str, object] = await go.inspect(interop_redis, "task", "-queue", queue,
                                                   "-id", task_id)
        return info

    fail = await state("fail")
    assert (fail["state"], fail["retried"], fail["max_retry"]) == ("archived", 2, 2)
    assert "failed on purpose" in str(fail["last_err"])
    assert (await state("skip"))["state"] == "archived"
    result = await state("result")
    assert (result["state"], result["result_hex"]) == ("completed", "00726573ff")
    assert (await state("slow"))["state"] == "archived"
    with pytest.raises(InspectorError):  # failn succeeded without retention: gone
        await state("failn")
    info = await go.inspect(interop_redis, "queue", "-queue", queue)
    assert (info["archived"], info["completed"], info["processed"], info["failed"]) == (
        3, 1, 9, 7)


async def test_producer_paces_enqueues_at_a_rate(asynq_go: GoPrograms, interop_redis: str,
                                                 asyncq_queue: str) -> None:
    """-rate R -duration D enqueues exactly R x D tasks, the k-th not before k/R s."""
    run = await asynq_go.produce(interop_redis, "-rate", "100", "-duration", "500ms",
                                 "-type", "ok", "-queue", asyncq_queue)
    assert run.errors == [] and run.summary["enqueued"] == 50
    times = [e["enqueued_at"] for e in run.enqueued]
    assert times == sorted(times)
    assert times[-1] - times[0] >= 0.49 * 49 / 50
    assert (await asynq_go.inspect(interop_redis, "queue", "-queue", asyncq_queue))[
        "pending"] == 50

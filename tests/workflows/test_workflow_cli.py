"""``asyncq workflow ls|inspect|cancel``, run in-process through the command's main()."""

from __future__ import annotations

import orjson
import pytest
import redis.asyncio

from asyncq import Client, Task, chain, group
from asyncq.testing import WorkerFactory
from tests.helpers.cli import Cli
from tests.workflows.flowapp import add, mul, mux

pytestmark = pytest.mark.anyio


async def cli(url: str, *args: str, code: int = 0) -> str:
    """``asyncq workflow ARGS`` (in-process) against ``url``; asserts its exit code."""
    ran = await Cli(url)("workflow", *args, ok=None)
    assert ran.returncode == code, ran.stderr.decode()
    return ran.stdout.decode()


async def test_workflow_ls_inspect_and_cancel(
        wf_redis: redis.asyncio.Redis, asyncq_fresh_redis: str, asyncq_client: Client,
        asyncq_worker: WorkerFactory) -> None:
    url = asyncq_fresh_redis
    async with asyncq_worker(mux, workflow_interval=0.5):
        done = await asyncq_client.enqueue_workflow(chain(add.s(1, 2), mul.pipe(2)))
        assert await done.result(asyncq_client, timeout=30) == 6
    waiting = await asyncq_client.enqueue_workflow(
        chain(group(Task("wf:noop"), Task("wf:noop")), Task("wf:count")))

    listed = orjson.loads(await cli(url, "ls", "--json"))
    assert [(w["id"], w["state"]) for w in listed] == [(waiting.id, "running"),
                                                       (done.id, "succeeded")]
    assert listed[1]["result"] == 6
    human = await cli(url, "inspect", waiting.id)
    assert "running" in human and "join" in human and "waiting" in human
    doc = orjson.loads(await cli(url, "inspect", waiting.id, "--json"))
    assert [(n["node"], n["kind"], n["state"]) for n in doc["nodes"]] == [
        ("0", "task", "pending"), ("1", "task", "pending"), ("2", "task", "waiting"),
        ("g0", "join", "waiting")]
    assert "cancelled" in await cli(url, "cancel", waiting.id)
    await cli(url, "cancel", waiting.id, code=1)
    doc = orjson.loads(await cli(url, "inspect", waiting.id, "--json"))
    assert doc["state"] == "cancelled"
    assert {n["state"] for n in doc["nodes"] if n["kind"] == "task"} == {"deleted"}

"""Documented limits that used to act silently are said out loud."""

from __future__ import annotations

import json

import pytest
import structlog.testing
from redis.asyncio import Redis

from asyncq import Client, Inspector, Task
from asyncq._broker import _keys as K
from tests.helpers.cli import Cli, out

pytestmark = pytest.mark.anyio


async def test_archive_all_beyond_the_cap_says_how_many_were_deleted(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis, cli: Cli,
) -> None:
    await asyncq_client.enqueue_many([Task("t", i, queue=asyncq_queue) for i in range(10_030)])
    with structlog.testing.capture_logs() as logs:
        async with Inspector(asyncq_client.broker) as inspector:
            count = await inspector.archive_all(asyncq_queue, "pending")
    assert (count, count.trimmed) == (10_030, 30)
    assert await redis_client.zcard(K.queue_keys(asyncq_queue).archived) == 10_000
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert (warning["archived"], warning["deleted"]) == (10_030, 30)
    await asyncq_client.enqueue_many([Task("t", i, queue=asyncq_queue) for i in range(5)])
    said = out(await cli("task", "archiveall", "-q", asyncq_queue, "-s", "pending"))
    assert "the 5 oldest archived task(s) were deleted" in said


async def test_the_archive_warning_goes_to_stderr_so_json_stays_parseable(
    asyncq_client: Client, asyncq_queue: str, cli: Cli,
) -> None:
    await asyncq_client.enqueue_many([Task("t", i, queue=asyncq_queue) for i in range(10_005)])
    ran = await cli("task", "archiveall", "-q", asyncq_queue, "-s", "pending", "--json")
    doc = json.loads(ran.stdout)  # nothing but the document on stdout
    assert (doc["count"], doc["archive_trimmed"]) == (10_005, 5)
    assert b"archive over its cap" in ran.stderr


def test_an_ops_command_run_in_process_leaves_the_callers_logging_alone(
    asyncq_redis_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    from asyncq._cli import main

    before = structlog.get_config()
    assert main(["queue", "ls", "--redis-url", asyncq_redis_url]) == 0
    assert structlog.get_config() == before
    capsys.readouterr()

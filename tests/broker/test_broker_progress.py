"""progress.lua in asyncq's layout: what a report writes to the task's hash, and what it does
not (the behaviour is the conformance suite's: conformance/test_conf_progress.py)."""

from __future__ import annotations

import pytest
from broker_helpers import OWNER, lease
from redis.asyncio import Redis

from asyncq import Client
from asyncq._broker import RedisBroker
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


async def test_a_task_that_never_reported_has_no_progress(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str,
) -> None:
    [task_id] = await lease(broker, client, asyncq_queue)
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert "progress" not in fields and "progress_run" not in fields  # (nothing stored)


async def test_a_write_without_the_lease_is_refused_and_changes_nothing(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    pending = (await client.enqueue("t", queue=q, process_in=60)).id
    await broker.set_progress(q, pending, OWNER, b'{"v": 0.1, "at": 1700000000000}')
    await broker.set_progress(q, "no-such-task", OWNER, b'{"v": 0.1, "at": 1700000000000}')
    assert "progress" not in await task_hash(redis_client, q, pending)
    assert await redis_client.exists(f"asyncq:{{{q}}}:t:no-such-task") == 0  # not created

"""Group aggregation in the broker (items 102-105)."""

from __future__ import annotations

import pytest
from broker_helpers import add_group_tasks
from redis.asyncio import Redis

from asyncq import Client, FakeClock
from asyncq._broker import RedisBroker
from asyncq._broker import _keys as K
from tests.broker.conformance.test_conf_aggregation import GRACE_CASES
from tests.helpers.dataplane import (
    smembers,
    task_hash,
    zmembers,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ 102-105: aggregation


async def test_aggregation_check_on_empty_group(
    broker: RedisBroker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    await redis_client.sadd(qk.groups, "g")  # a stale group name
    assert await broker.aggregation.check(asyncq_queue, "g", "s1", 60_000, 0, 5,
                                          clock.now_ms() + 120_000) == 0
    assert await smembers(redis_client, qk.groups) == set()
    assert await redis_client.exists(qk.aggregation_sets, qk.group("g") + ":s1") == 0


async def test_aggregation_check_takes_the_whole_group_at_max_size(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    members = await add_group_tasks(client, clock, asyncq_queue, "g", 5)
    qk = K.queue_keys(asyncq_queue)
    deadline = clock.now_ms() + 120_000
    await broker.aggregation.check(asyncq_queue, "g", "s1", 60_000, 0, 5, deadline)
    set_key = qk.group("g") + ":s1"
    assert await zmembers(redis_client, set_key) == members  # group scores are kept
    assert await redis_client.exists(qk.group("g")) == 0
    assert await smembers(redis_client, qk.groups) == set()
    assert await zmembers(redis_client, qk.aggregation_sets) == {set_key: deadline}


async def test_aggregation_check_takes_the_oldest_when_over_max_size(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    members = await add_group_tasks(client, clock, asyncq_queue, "g", 5)
    ids = list(members)
    qk = K.queue_keys(asyncq_queue)
    await broker.aggregation.check(asyncq_queue, "g", "s1", 60_000, 0, 3,
                                   clock.now_ms() + 120_000)
    assert list(await zmembers(redis_client, qk.group("g") + ":s1")) == ids[:3]
    assert list(await zmembers(redis_client, qk.group("g"))) == ids[3:]
    assert await smembers(redis_client, qk.groups) == {"g"}


@pytest.mark.parametrize(
    ("advance", "grace_ms", "max_delay_ms", "max_size", "taken"), GRACE_CASES)
async def test_aggregation_check_grace_and_max_delay(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str, advance: float, grace_ms: int, max_delay_ms: int, max_size: int,
    taken: int
) -> None:
    members = await add_group_tasks(client, clock, asyncq_queue, "g", 3, step=10)
    clock.advance(advance)
    qk = K.queue_keys(asyncq_queue)
    await broker.aggregation.check(asyncq_queue, "g", "s1", grace_ms, max_delay_ms, max_size,
                                   clock.now_ms() + 120_000)  # (its count: conformance/)
    assert list(await zmembers(redis_client, qk.group("g") + ":s1")) == list(members)[:taken]
    assert await redis_client.zcard(qk.group("g")) == 3 - taken
    assert (await redis_client.exists(qk.aggregation_sets)) == (1 if taken else 0)


async def test_read_aggregation_set_skips_tasks_that_are_gone(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    ids = list(await add_group_tasks(client, clock, asyncq_queue, "g", 3))
    await broker.aggregation.check(asyncq_queue, "g", "s1", 0, 0, 0, clock.now_ms() + 1)
    await redis_client.delete(K.queue_keys(asyncq_queue).task(ids[1]))
    raws = await broker.aggregation.read_set(asyncq_queue, "g", "s1")
    assert [r.id for r in raws] == [ids[0], ids[2]]


async def test_delete_aggregation_set(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    first = list(await add_group_tasks(client, clock, asyncq_queue, "g", 2, unique=600))
    await broker.aggregation.check(asyncq_queue, "g", "s1", 0, 0, 0, clock.now_ms() + 1)
    second = list(await add_group_tasks(client, clock, asyncq_queue, "g", 1))
    await broker.aggregation.check(asyncq_queue, "g", "s2", 0, 0, 0, clock.now_ms() + 1)

    await broker.aggregation.delete_set(asyncq_queue, "g", "s1")  # (counts: conformance/)
    assert await redis_client.exists(qk.group("g") + ":s1") == 0
    for task_id in first:
        assert await task_hash(redis_client, asyncq_queue, task_id) == {}
    for payload in (b"g0", b"g1"):  # their uniqueness locks are released
        assert await redis_client.exists(qk.unique("t", payload)) == 0
    assert list(await zmembers(redis_client, qk.aggregation_sets)) == [qk.group("g") + ":s2"]
    assert list(await zmembers(redis_client, qk.group("g") + ":s2")) == second
    assert await task_hash(redis_client, asyncq_queue, second[0]) != {}


async def test_reclaim_stale_aggregation_sets(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str
) -> None:
    qk = K.queue_keys(asyncq_queue)
    stale = await add_group_tasks(client, clock, asyncq_queue, "g:x", 2)  # ':' in the name
    await broker.aggregation.check(asyncq_queue, "g:x", "s1", 0, 0, 0,
                                   clock.now_ms() + 60_000)
    fresh = await add_group_tasks(client, clock, asyncq_queue, "h", 1)
    await broker.aggregation.check(asyncq_queue, "h", "s2", 0, 0, 0, clock.now_ms() + 600_000)
    assert await smembers(redis_client, qk.groups) == set()

    clock.advance(60)  # (the counts: conformance/test_conf_aggregation.py)
    await broker.aggregation.reclaim_stale_sets(asyncq_queue)
    assert await zmembers(redis_client, qk.group("g:x")) == stale
    assert await redis_client.exists(qk.group("g:x") + ":s1") == 0
    assert await smembers(redis_client, qk.groups) == {"g:x"}
    assert list(await zmembers(redis_client, qk.aggregation_sets)) == [qk.group("h") + ":s2"]
    assert await zmembers(redis_client, qk.group("h") + ":s2") == fresh
    assert await broker.aggregation.list_groups(asyncq_queue) == ["g:x"]

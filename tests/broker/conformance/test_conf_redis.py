"""Every broker and the Redis server under it: a script cache Redis lost (a restart) is
loaded again, not surfaced, whatever the batch; a Redis that cannot be reached is a
BrokerError from every call. (One server, not the cluster: the script cache is flushed on
the test's server.)"""

from __future__ import annotations

import pytest
from broker_helpers import LEASE_MS, OWNER, WAITER_TTL_MS, new_task
from redis.asyncio import Redis

from asyncq import BrokerError, FakeClock
from asyncq._broker import Broker, Outcome
from asyncq._broker._connection import make_broker
from tests.helpers.dataplane import dead_redis_url

pytestmark = pytest.mark.anyio


async def test_scripts_are_reloaded_after_redis_lost_them(
    broker: Broker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    """A restarted Redis has an empty script cache: NOSCRIPT must be handled, not surfaced."""
    now = clock.now_ms()
    await broker.store(new_task(asyncq_queue, "warm", now))
    await redis_client.script_flush()
    assert await broker.store(new_task(asyncq_queue, "a", now)) == 1
    await redis_client.script_flush()
    codes = await broker.store_many([new_task(asyncq_queue, f"m{i}", now) for i in range(3)])
    assert codes == [1, 1, 1]
    await redis_client.script_flush()
    raws, _ = await broker.dequeue(asyncq_queue, 2, OWNER, LEASE_MS, WAITER_TTL_MS)
    await redis_client.script_flush()
    results = await broker.finish(
        [Outcome("done", asyncq_queue, r.id) for r in raws], OWNER)
    assert results == [True, True]


async def test_store_many_keeps_batch_order_when_some_scripts_are_not_cached(
    broker: Broker, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    """The first of two items with one id wins, even if only the second's script was cached
    (Redis restarted, then one enqueue ran before the batch)."""
    now = clock.now_ms()
    await redis_client.script_flush()
    assert await broker.store(new_task(asyncq_queue, "warm", now)) == 1  # caches "enqueue"
    codes = await broker.store_many([
        new_task(asyncq_queue, "x", now, process_at_ms=now + 60_000),  # "schedule": not cached
        new_task(asyncq_queue, "x", now),
    ])
    assert codes == [1, 0]


async def test_broker_errors_when_redis_is_down(layout: str, clock: FakeClock) -> None:
    broker = make_broker(dead_redis_url(), clock=clock, wire=layout)  # type: ignore[arg-type]
    try:
        with pytest.raises(BrokerError):
            await broker.ping()
        with pytest.raises(BrokerError):
            await broker.store(new_task("q", "a", clock.now_ms()))
        with pytest.raises(BrokerError):
            await broker.store_many([new_task("q", "a", clock.now_ms())])
        with pytest.raises(BrokerError):
            await broker.dequeue("q", 1, OWNER, LEASE_MS, WAITER_TTL_MS)
        with pytest.raises(BrokerError):
            await broker.finish([Outcome("done", "q", "a")], OWNER)
    finally:
        await broker.close()

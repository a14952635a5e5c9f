"""Redis errors are mapped once, where the broker meets them: a BrokerError says whether trying
again can help (``transient``) or never will (``refused``), and chains the redis-py error
for debugging only."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis.exceptions import (
    ClusterDownError,
    DataError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from asyncq import BrokerError
from asyncq._broker import _keys as K
from asyncq._broker._connection import check_reachable, make_broker
from asyncq._broker._redis_errors import broker_error
from tests.helpers.dataplane import dead_redis_url

pytestmark = pytest.mark.anyio

OWNER = "srv-errors"


@pytest.mark.parametrize(("error", "transient", "refused"), [
    (RedisConnectionError("Connection closed by server."), True, False),
    (RedisTimeoutError("Timeout reading from socket"), True, False),
    (OSError("network is unreachable"), True, False),
    (ClusterDownError("CLUSTERDOWN The cluster is down"), True, False),
    (TryAgainError("TRYAGAIN"), True, False),
    (ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
     False, True),
    (ResponseError("ERR Error running script: user_script:1: boom"), False, True),
    (OutOfMemoryError("OOM command not allowed when used memory > 'maxmemory'."), False, False),
    (ResponseError("BUSY Redis is busy running a script."), False, False),
    (ReadOnlyError("READONLY You can't write against a read only replica."), False, False),
    (ResponseError("LOADING Redis is loading the dataset in memory"), False, False),
    (DataError("Invalid input of type: 'dict'."), False, False),
], ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v))
def test_each_redis_error_is_mapped_once(error: Exception, transient: bool,
                                         refused: bool) -> None:
    mapped = broker_error("call failed", error)
    assert (mapped.transient, mapped.refused) == (transient, refused)
    assert mapped.__cause__ is error and str(mapped) == "call failed"


def test_a_broker_error_built_by_hand_is_neither_unless_told() -> None:
    assert (BrokerError("x").transient, BrokerError("x").refused) == (False, False)
    assert BrokerError("x", transient=True).transient
    assert not BrokerError("x", transient=True, refused=True).refused  # never both


async def test_the_broker_maps_what_redis_answers(redis_client: Redis,
                                                  asyncq_queue: str) -> None:
    down = make_broker(dead_redis_url())
    with pytest.raises(BrokerError) as info:
        await down.ping()
    assert info.value.transient and not info.value.refused
    await down.close()

    broker = make_broker(redis_client)
    await redis_client.set(K.queue_keys(asyncq_queue).pending, "not a list")
    with pytest.raises(BrokerError) as info:
        await broker.dequeue(asyncq_queue, 1, OWNER, 1000, 1000)
    assert info.value.refused and not info.value.transient
    assert isinstance(info.value.__cause__, ResponseError)


async def test_reachability_is_checked_through_the_broker() -> None:
    dead = dead_redis_url()
    with pytest.raises(BrokerError, match=f"cannot reach Redis at {dead}") as info:
        await check_reachable(dead)
    assert info.value.transient
    with pytest.raises(ValueError):
        await check_reachable("http://nope")

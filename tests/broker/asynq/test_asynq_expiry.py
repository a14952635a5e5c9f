"""wire=asynq has no task expiry (Go asynq's TaskMessage holds none its servers would honour):
an enqueue with one is refused with a ValueError saying so, and nothing is stored."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from asyncq import Client, Task

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("many", [False, True])
async def test_an_enqueue_with_an_expiry_is_refused_and_stores_nothing(
    aclient: Client, redis_client: Redis, asyncq_queue: str, many: bool,
) -> None:
    task = Task("t", queue=asyncq_queue, expires_in=60)
    with pytest.raises(ValueError) as refused:
        if many:
            await aclient.enqueue_many([task])
        else:
            await aclient.enqueue(task)
    assert "expires_in/expires_at is not available with wire=asynq" in str(refused.value)
    assert await redis_client.keys(f"asynq:{{{asyncq_queue}}}:*") == []
    assert (await aclient.enqueue("t", queue=asyncq_queue)).id  # without it: stored

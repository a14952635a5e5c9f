"""Errors a web developer meets first read as what went wrong and what to do."""

from __future__ import annotations

import pytest

from asyncq import BrokerError, Client, DuplicateTaskError, ServeMux, Task, Worker
from asyncq._testing.redis_server import RedisServer
from tests.helpers.dataplane import dead_redis_url

pytestmark = pytest.mark.anyio


def test_a_misspelt_worker_option_names_the_close_match_and_the_valid_ones() -> None:
    with pytest.raises(TypeError, match=r"unknown worker option\(s\): 'concurrrency' \(did you "
                                        r"mean 'concurrency'\?\); valid options are .*lease_"):
        Worker("redis://127.0.0.1:1/0", ServeMux(), concurrrency=3)


async def test_enqueue_with_redis_down_says_it_cannot_reach_redis_without_the_password() -> None:
    url = dead_redis_url().replace("redis://", "redis://:hunter2@")
    async with Client(url) as client:
        with pytest.raises(BrokerError, match=r"cannot reach Redis at 127\.0\.0\.1:\d+ ") as info:
            await client.enqueue("t")
    assert info.value.transient
    assert "hunter2" not in str(info.value)


async def test_a_wrong_password_says_authentication_failed() -> None:
    with RedisServer(["--requirepass", "right-one"]) as server:
        url = server.url.replace("redis://", "redis://:wrong-one@")
        async with Client(url) as client:
            with pytest.raises(BrokerError, match="refused the credentials") as info:
                await client.enqueue("t")
    assert "wrong-one" not in str(info.value) and "right-one" not in str(info.value)


async def test_a_duplicate_names_the_task_that_holds_the_lock(
    asyncq_client: Client, asyncq_queue: str,
) -> None:
    first = await asyncq_client.enqueue("report", {"user": 1}, queue=asyncq_queue, unique=60)
    with pytest.raises(DuplicateTaskError) as info:
        await asyncq_client.enqueue("report", {"user": 1}, queue=asyncq_queue, unique=60)
    assert info.value.task_id == first.id and first.id in str(info.value)
    [dup] = await asyncq_client.enqueue_many(
        [Task("report", {"user": 1}, queue=asyncq_queue, unique=60)])
    assert isinstance(dup, DuplicateTaskError) and dup.task_id == first.id

"""Client.enqueue_many: one pipelined call, one result per task (items 58, 59)."""

from __future__ import annotations

import pytest
from client_helpers import (
    HOUR_MS,
    ok_info,
)
from redis.asyncio import Redis

from asyncq import (
    BrokerError,
    Client,
    DuplicateTaskError,
    FakeClock,
    Task,
    TaskIDConflictError,
    TaskInfo,
    TaskState,
)
from asyncq._broker import _keys as K
from tests.helpers.dataplane import (
    dead_redis_url,
    dt,
    lmembers,
    queue_key_names,
    task_hash,
    zmembers,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ 58, 59: enqueue_many


async def test_enqueue_many_immediate(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    tasks = [Task("t", {"n": i}, queue=asyncq_queue) for i in range(3)]
    results = await client.enqueue_many(tasks)
    infos = [ok_info(r) for r in results]
    assert [i.state for i in infos] == [TaskState.PENDING] * 3
    assert [i.queue for i in infos] == [asyncq_queue] * 3
    assert [i.json() for i in infos] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert len({i.id for i in infos}) == 3
    # FIFO: the first task of the batch is the first to be dequeued (tail of the list).
    pending = await lmembers(redis_client, K.queue_keys(asyncq_queue).pending)
    assert pending[::-1] == [i.id for i in infos]
    for i in infos:
        fields = await task_hash(redis_client, asyncq_queue, i.id)
        assert fields["state"] == b"pending"
        assert fields["pending_since"] == str(clock.now_ms()).encode()


async def test_enqueue_many_scheduled(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    at = clock.now_ms() + HOUR_MS
    results = await client.enqueue_many([Task("t", queue=asyncq_queue, process_at=dt(at))])
    info = ok_info(results[0])
    assert info.state is TaskState.SCHEDULED
    assert info.next_process_at == dt(at)
    assert await zmembers(redis_client, K.queue_keys(asyncq_queue).scheduled) == {info.id: at}
    assert (await task_hash(redis_client, asyncq_queue, info.id))["state"] == b"scheduled"


async def test_enqueue_many_mixed_batch_has_per_item_results(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    other = f"{asyncq_queue}-o"
    await client.enqueue("t", queue=asyncq_queue, task_id="taken")
    tasks = [
        Task("t", b"0", queue=asyncq_queue),
        Task("t", b"1", queue=asyncq_queue, process_in=60),
        Task("t", b"2", queue=asyncq_queue, group="g"),
        Task("t", b"3", queue=asyncq_queue, unique=60),
        Task("t", b"3", queue=asyncq_queue, unique=60),  # duplicate of the previous item
        Task("t", b"5", queue=asyncq_queue, task_id="taken"),  # id conflict
        Task("t", b"6", queue=other, task_id="taken"),  # same id, other queue: fine
        Task("t", b"7", queue=asyncq_queue, task_id="dup"),
        Task("t", b"8", queue=asyncq_queue, task_id="dup"),  # conflicts with item 7
    ]
    results = await client.enqueue_many(tasks)
    assert len(results) == len(tasks)
    assert [type(r) for r in results] == [
        TaskInfo, TaskInfo, TaskInfo, TaskInfo, DuplicateTaskError, TaskIDConflictError,
        TaskInfo, TaskInfo, TaskIDConflictError]
    states = [r.state for r in results if isinstance(r, TaskInfo)]
    assert states == [TaskState.PENDING, TaskState.SCHEDULED, TaskState.AGGREGATING,
                      TaskState.PENDING, TaskState.PENDING, TaskState.PENDING]
    r0, r1, r2, r3 = (ok_info(r) for r in results[:4])
    qk = K.queue_keys(asyncq_queue)
    assert set(await lmembers(redis_client, qk.pending)) == {"taken", r0.id, r3.id, "dup"}
    assert await zmembers(redis_client, qk.scheduled) == {r1.id: clock.now_ms() + 60_000}
    assert await zmembers(redis_client, qk.group("g")) == {r2.id: clock.now_ms()}
    assert await redis_client.get(qk.unique("t", b"3")) == r3.id.encode()
    assert (await task_hash(redis_client, asyncq_queue, "dup"))["payload"] == b"7"
    assert (await task_hash(redis_client, asyncq_queue, "taken"))["payload"] == b""
    assert await lmembers(redis_client, K.queue_keys(other).pending) == ["taken"]


async def test_enqueue_many_empty(client: Client) -> None:
    assert await client.enqueue_many([]) == []


async def test_enqueue_many_validates_everything_before_sending(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    good = Task("t", queue=asyncq_queue)
    with pytest.raises(TypeError, match="item 1"):
        await client.enqueue_many([good, None, good])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="item 2"):
        await client.enqueue_many([good, good, "t"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="item 1"):
        await client.enqueue_many([good, Task("t", queue=asyncq_queue, unique_key="k")])
    assert await queue_key_names(redis_client, asyncq_queue) == set()


async def test_enqueue_many_large_batch(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    n = 2_500  # more than one pipeline chunk
    results = await client.enqueue_many(Task("t", i, queue=asyncq_queue) for i in range(n))
    assert all(isinstance(r, TaskInfo) for r in results)
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == n


async def test_enqueue_with_redis_down() -> None:
    async with Client(dead_redis_url()) as client:
        with pytest.raises(BrokerError):
            await client.enqueue("t", queue="q")
        results = await client.enqueue_many([Task("t"), Task("t", process_in=5)])
        assert len(results) == 2
        assert all(isinstance(r, BrokerError) for r in results)



"""Awaitable results and task events on ``?wire=asynq`` (Go asynq's layout), against a real
Redis and a real asyncq Worker: a result never races its waiter (a fresh client each time, as
test_result_race.py checks for asyncq's own layout), the event stream tells each transition, and
typed tasks round-trip unchanged. What Go keeps stays as Go keeps it: the extras live in keys
below ``asynq:{q}:asyncq:``, which Go never reads."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from redis.asyncio import Redis

from asyncq import (
    Client,
    Retry,
    ServeMux,
    SkipRetry,
    Task,
    TaskFailedError,
    TaskNotFoundError,
    TaskState,
    Worker,
)
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio
TRIES = 20


@pytest.fixture
def url(asyncq_redis_url: str) -> str:
    return asyncq_redis_url + "?wire=asynq"


@dataclasses.dataclass
class Receipt:
    to: str
    sent_at: dt.datetime
    count: int


def fast_mux() -> ServeMux:
    mux = ServeMux()

    @mux.handler("value")
    async def value(task: Task) -> object:
        return task.json()

    @mux.handler("nothing")
    async def nothing(task: Task) -> None:
        return None

    @mux.task("typed:nothing")
    async def typed_nothing() -> None:
        return None

    return mux


@asynccontextmanager
async def running(url: str, mux: ServeMux, queue: str, **config: Any) -> AsyncIterator[Worker]:
    async with Worker(url, mux, queues={queue: 1}, **config) as worker:
        yield worker


async def drained(redis: Redis, queue: str, worker: Worker) -> None:
    """Wait until the asynq queue has nothing pending or active and every outcome is written."""
    qk = K.queue_keys(queue)

    async def done() -> bool:
        return (await redis.llen(qk.pending) == 0 and await redis.llen(qk.active) == 0
                and not (worker.processor.running or worker.acker.pending))
    await wait_until(done, timeout=10, message="asynq queue drained")


async def test_enqueue_then_result_on_a_fresh_client_never_misses_a_fast_task(
    url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    qk = K.queue_keys(q)
    async with running(url, fast_mux(), q, concurrency=20) as worker:
        for i in range(TRIES):
            # The task is done before the wait starts: a fresh client subscribes only then.
            async with Client(url) as producer:
                value = await producer.enqueue("value", i, queue=q)
                nothing = await producer.enqueue("nothing", queue=q)
                typed = await producer.enqueue("typed:nothing", {}, queue=q)
            await drained(redis_client, q, worker)
            async with Client(url) as waiter:
                assert await waiter.result(value, timeout=30) == i
                assert await waiter.result(nothing, timeout=30) is None
                done = await waiter.wait(typed, timeout=30)
                assert done.state is TaskState.COMPLETED
        for i in range(TRIES):
            # The task ends while the wait listens (enqueued by the waiting client itself).
            async with Client(url) as client:
                assert await client.result(await client.enqueue("value", [i], queue=q),
                                           timeout=5) == [i]
                assert await client.result(await client.enqueue("nothing", queue=q),
                                           timeout=5) is None
    # What Go sees: the value kept in asynq's completed set with its result (the default
    # result retention), the task that returned nothing deleted as Go's Done deletes it; its
    # completion mark is in asyncq's own key.
    assert await redis_client.zscore(qk.completed, value.id) is not None
    assert await redis_client.hget(qk.task(value.id), "result") == b"%d" % (TRIES - 1)
    assert await redis_client.exists(qk.task(nothing.id)) == 0
    assert await redis_client.zscore(qk.completed, nothing.id) is None
    assert await redis_client.zscore(K.extra_keys(q).marks, nothing.id) is not None


async def test_a_mark_holds_no_id_and_retention_zero_keeps_nothing(
    url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    async with running(url, fast_mux(), q) as worker:
        async with Client(url) as client:
            nothing = await client.enqueue("nothing", queue=q)
            assert await client.result(nothing, timeout=30) is None
            # The mark does not hold its id: a new task may take it at once (and is read first).
            reused = await client.enqueue("value", "again", queue=q, task_id=nothing.id)
            assert await client.result(reused, timeout=30) == "again"
            # retention=0 keeps nothing: only a waiter already listening learns the outcome.
            gone = await client.enqueue("nothing", queue=q, retention=0)
            await drained(redis_client, q, worker)
            assert await redis_client.exists(K.queue_keys(q).task(gone.id)) == 0
            assert await redis_client.zscore(K.extra_keys(q).marks, gone.id) is None
        async with Client(url) as late:
            with pytest.raises(TaskNotFoundError):
                await late.result(gone, timeout=5)


async def test_the_event_stream_tells_every_transition(
    url: str, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    mux = fast_mux()
    tries: dict[str, int] = {}

    @mux.handler("flaky")
    async def flaky(task: Task) -> None:
        tries[task.id] = tries.get(task.id, 0) + 1
        if tries[task.id] == 1:
            raise Retry(0, "first run fails")
        raise SkipRetry("second run gives up")

    async with (running(url, mux, q, forward_interval=0.05), Client(url) as client,
                client.events([q]) as events):
        ok = await client.enqueue("value", {"n": 1}, queue=q)
        bad = await client.enqueue("flaky", queue=q)
        seen: dict[str, list[Any]] = {ok.id: [], bad.id: []}

        async def until_final() -> bool:
            while not all(s and s[-1].final for s in seen.values()):
                event = await events.__anext__()
                seen[event.id].append(event)
            return True
        await wait_until(until_final, timeout=10)
    assert [(e.previous, e.state) for e in seen[ok.id]] == [
        (None, TaskState.PENDING), (TaskState.PENDING, TaskState.ACTIVE),
        (TaskState.ACTIVE, TaskState.COMPLETED)]
    done = seen[ok.id][-1]
    assert (done.type, done.result_json(), done.result_kept) == ("value", {"n": 1}, True)
    assert [(e.previous, e.state) for e in seen[bad.id]] == [
        (None, TaskState.PENDING), (TaskState.PENDING, TaskState.ACTIVE),
        (TaskState.ACTIVE, TaskState.RETRY), (TaskState.RETRY, TaskState.PENDING),
        (TaskState.PENDING, TaskState.ACTIVE), (TaskState.ACTIVE, TaskState.ARCHIVED)]
    retry, archived = seen[bad.id][2], seen[bad.id][-1]
    assert retry.last_error is not None and "first run fails" in retry.last_error
    assert retry.next_process_at is not None
    assert archived.retried == 1  # (the retried count of its TaskMessage)
    assert archived.last_error is not None and "second run gives up" in archived.last_error


async def test_a_typed_task_round_trips_unchanged(url: str, redis_client: Redis,
                                                  asyncq_queue: str) -> None:
    q = asyncq_queue
    mux = ServeMux()

    @mux.task("typed:send", queue=q, max_retry=5)
    async def send(to: str, count: int, *, urgent: bool = False) -> Receipt:
        return Receipt(to, dt.datetime(2026, 1, 2, tzinfo=dt.UTC), count * (2 if urgent else 1))

    @mux.task("typed:fail", queue=q, max_retry=0)
    async def fail(why: str) -> int:
        raise ValueError(why)

    async with running(url, mux, q), Client(url) as client:
        info = await send.enqueue(client, "ada@example.com", 3, urgent=True)
        receipt = await send.result(client, info, timeout=30)
        assert receipt == Receipt("ada@example.com", dt.datetime(2026, 1, 2, tzinfo=dt.UTC), 6)
        assert type(receipt) is Receipt
        failing = await fail.enqueue(client, "no luck")
        with pytest.raises(TaskFailedError, match="no luck"):
            await fail.result(client, failing, timeout=10)
    # Stored as Go reads a task: its type and JSON arguments in the TaskMessage.
    kept = _codec.decode(await redis_client.hget(K.queue_keys(q).task(info.id), "msg") or b"")
    assert (kept.type, kept.queue) == ("typed:send", q)
    assert b"ada@example.com" in kept.payload

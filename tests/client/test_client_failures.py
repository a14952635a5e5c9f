"""Failures of ``Client.wait`` / ``result`` / ``apply`` say why: Redis unreachable is a
BrokerError (within the timeout), a timeout tells the task's last known state, a failed
workflow names its step, and a task whose outcome was missed on a killed connection says so."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import (
    BrokerError,
    Client,
    ServeMux,
    SkipRetry,
    Task,
    TaskFailedError,
    TaskInfo,
    TaskNotFoundError,
    TaskState,
    WaitTimeoutError,
    chain,
)
from asyncq._broker import _keys as K
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.faults import FaultyBroker

pytestmark = pytest.mark.anyio


def failing_mux(gate: asyncio.Event | None = None) -> ServeMux:
    mux = ServeMux()

    @mux.handler("echo")
    async def echo(task: Task) -> object:
        return task.json()

    @mux.handler("quiet")
    async def quiet(task: Task) -> None:
        """Returns nothing, so it keeps nothing once done (no result to retain)."""
        if gate is not None:
            await gate.wait()

    @mux.handler("boom")
    async def boom(task: Task) -> None:
        raise ValueError("boom")

    @mux.handler("refuse")
    async def refuse(task: Task) -> None:
        raise SkipRetry("told to fail")

    return mux


async def listening(redis: Redis, queue: str) -> bool:
    return bool(await redis.exists(K.queue_keys(queue).listening))


async def test_waits_raise_a_broker_error_at_once_while_redis_is_down(
    own_server: RedisServer,
) -> None:
    async with Client(own_server.url) as client:
        info = await client.enqueue("echo", 1, queue="q")
        own_server.stop()
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: client.apply("echo", 1, queue="q", timeout=120),
            lambda: client.result(info, timeout=120),
            lambda: client.wait(info, timeout=120),
            lambda: client.wait(info),  # no timeout: still answered
        ]
        with pytest.raises(BrokerError):  # what enqueue says
            await client.enqueue("echo", 1, queue="q")
        for call in calls:  # at once: well before the calls' own timeouts
            with anyio.fail_after(30), pytest.raises(BrokerError, match="cannot listen"):
                await call()


async def test_a_wait_whose_timeout_runs_out_while_redis_is_down_raises_a_broker_error(
    own_server: RedisServer,
) -> None:
    async with Client(own_server.url) as client, Redis.from_url(own_server.url) as redis:
        info = await client.enqueue("echo", 1, queue="q")  # no worker runs it
        began = time.monotonic()
        waiting = asyncio.ensure_future(client.result(info, timeout=10))
        await wait_until(lambda: listening(redis, "q"), timeout=8)
        await redis.aclose()
        own_server.stop()
        with pytest.raises(BrokerError, match="no outcome within 10 s, and Redis cannot be "
                                              "reached") as caught:
            await waiting
    assert caught.value.transient
    assert time.monotonic() - began < 40  # the timeout ends it, Redis down or not


async def test_a_timeout_tells_the_last_known_state_and_error(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    pending = await asyncq_client.enqueue("echo", 1, queue=asyncq_queue)
    with pytest.raises(WaitTimeoutError, match=f"task {pending.id!r} in queue "
                                               f"{asyncq_queue!r} still pending after 0.3 s$"):
        await asyncq_client.result(pending, timeout=0.3)

    async with asyncq_worker(failing_mux(), queues={asyncq_queue: 1},
                             retry_delay=lambda n, exc, task: 60):
        info = await asyncq_client.enqueue("boom", queue=asyncq_queue)
        with pytest.raises(TimeoutError) as caught:  # a TimeoutError, as before
            await asyncq_client.result(info, timeout=1.5)
    err = caught.value
    assert isinstance(err, WaitTimeoutError)
    assert err.info is not None and err.info.state is TaskState.RETRY
    assert err.info.retried == 1 and err.last_error == "ValueError: boom"
    assert str(err).startswith(f"task {info.id!r} in queue {asyncq_queue!r} still retry "
                               "after 1.5 s (retried 1 time, next run at ")
    assert str(err).endswith(", last error: ValueError: boom)")


async def test_a_failed_workflow_names_its_step_not_an_internal_queue(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    flow = chain(Task("echo", 1, queue=asyncq_queue), Task("refuse", queue=asyncq_queue),
                 Task("echo", queue=asyncq_queue))
    async with asyncq_worker(failing_mux(), queues={asyncq_queue: 1},
                             workflow_interval=0.5, forward_interval=0.1):
        handle = await asyncq_client.enqueue_workflow(flow)
        with pytest.raises(TaskFailedError) as caught:
            await asyncq_client.result(handle, timeout=10)
    wf = handle.id
    assert str(caught.value) == (
        f"workflow {wf!r} failed at step 1 (task '{wf}.1' of type 'refuse' in queue "
        f"{asyncq_queue!r}): SkipRetry: told to fail")
    assert caught.value.info.state is TaskState.ARCHIVED


async def test_an_outcome_missed_on_a_killed_connection_is_told_as_such(
    asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    """The task ends, keeping nothing, while the client's event connection is down: the wait
    learns it was missed on that connection, not that it ended before the client listened."""
    broker = FaultyBroker(redis_client)
    cannot_listen = broker.fault("set_listening", active=False)
    gate = asyncio.Event()
    async with Client(broker=broker) as client, \
            asyncq_worker(failing_mux(gate), queues={asyncq_queue: 1}):
        info = await client.enqueue("quiet", queue=asyncq_queue, retention=0)
        waiting = asyncio.ensure_future(client.result(info, timeout=60))
        await wait_until(lambda: listening(redis_client, asyncq_queue), timeout=20)
        cannot_listen.active = True
        assert await redis_client.client_kill_filter(_type="pubsub") >= 1
        await wait_until(lambda: cannot_listen.fired >= 1, timeout=20)  # resubscribing fails
        gate.set()
        task_key = K.queue_keys(asyncq_queue).task(info.id)
        await wait_until(lambda: _gone(redis_client, task_key), timeout=20)
        assert not waiting.done()
        cannot_listen.active = False
        with pytest.raises(TaskNotFoundError) as caught:
            await waiting
    message = str(caught.value)
    assert "ended while this client's connection for task events was broken" in message
    assert "before this client listened" not in message


async def _gone(redis: Redis, key: str) -> bool:
    return not await redis.exists(key)



async def test_a_wait_whose_first_read_meets_an_outage_waits_out_its_timeout_then_says_so(
    own_server: RedisServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redis goes away after the wait listens but before it reads the task's state: the read
    is retried like the subscription is, and the wait ends at its timeout saying Redis cannot
    be reached (not at once, with the read's own error)."""
    async with Client(own_server.url) as client:
        info = await client.enqueue("echo", 1, queue="q")  # no worker runs it
        waits = client._waits
        read = waits._read

        async def read_after_the_outage_began(queue: str, task_id: str) -> TaskInfo | None:
            own_server.stop()  # (the fault, placed exactly between listening and reading)
            monkeypatch.setattr(waits, "_read", read)
            return await read(queue, task_id)

        monkeypatch.setattr(waits, "_read", read_after_the_outage_began)
        with pytest.raises(BrokerError, match=r"no outcome within 1\.5 s, and Redis cannot be "
                                              "reached") as caught:
            await client.result(info, timeout=1.5)
    assert caught.value.transient

"""The push links (``asyncq._broker._push``) over TLS: the worker's subscriptions use the
URL's certificates and server name, and a name that does not match is refused."""

from __future__ import annotations

import uuid

import anyio
import pytest
from redis.asyncio import Redis
from topology.tls import TLSRedisServer

import asyncq
from asyncq import BrokerError, Client
from asyncq._broker import QueueWake, RedisBroker
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.inprocess import gate_dequeues

pytestmark = pytest.mark.anyio


async def test_a_worker_over_tls_hears_its_hand_offs(tls_server: TLSRedisServer) -> None:
    url = tls_server.url + "&ssl_server_hostname=localhost"
    queue = f"push-tls-{uuid.uuid4().hex[:6]}"
    started: list[str] = []
    mux = asyncq.ServeMux()

    @mux.handler("t")
    async def t(task: asyncq.Task) -> None:
        started.append(task.id or "")

    factory = WorkerFactory(url)
    try:
        async with Client(url) as client, factory(mux, queues={queue: 1},
                                                  idle_poll_interval=30) as w:
            broker = w.worker.broker
            assert isinstance(broker, RedisBroker) and isinstance(broker.redis, Redis)
            redis = broker.redis
            idle = K.queue_keys(queue).idle

            async def registered() -> bool:
                return int(await redis.zcard(idle)) == 1

            await wait_until(registered, timeout=20, message="the worker registered as idle")
            gate = gate_dequeues(w.worker.broker)  # only the hand-off can bring the task
            info = await client.enqueue("t", queue=queue)
            await wait_until(lambda: info.id in started, timeout=20,
                             message="handed off over TLS")
            gate.set()
    finally:
        await factory.aclose()


async def test_a_tls_server_name_that_does_not_match_is_refused(
    tls_server: TLSRedisServer,
) -> None:
    ok = make_broker(tls_server.url + "&ssl_server_hostname=localhost")
    stream = ok.listen_signals(["q"])
    try:
        with anyio.fail_after(10):
            assert await anext(stream) is None
            await ok.publish_cancel("x")
            await ok.redis.publish(K.WAKE_CHANNEL, "q")
            assert [await anext(stream), await anext(stream)][1] == QueueWake("q")
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await ok.close()
    bad = make_broker(tls_server.url + "&ssl_server_hostname=redis.example")
    stream = bad.listen_signals(["q"])
    try:
        with pytest.raises(BrokerError, match=r"Hostname mismatch|doesn't match"):
            with anyio.fail_after(10):
                await anext(stream)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await bad.close()

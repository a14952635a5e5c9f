"""Fixtures of the wire=asynq broker tests: an AsynqBroker and a Client on one FakeClock over the
shared test Redis, and helpers reading asynq's records as Go would."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from topology.cluster import three_masters

from asyncq import Client, FakeClock
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._broker._connection import make_broker


@pytest.fixture
async def abroker(asyncq_redis_url: str, clock: FakeClock,
                  anyio_backend: object) -> AsyncIterator[AsynqBroker]:
    b: Any = make_broker(asyncq_redis_url + "?wire=asynq", clock=clock)
    assert isinstance(b, AsynqBroker)
    try:
        yield b
    finally:
        await b.close()


@pytest.fixture
def aclient(abroker: AsynqBroker, clock: FakeClock) -> Client:
    return Client(abroker, clock=clock)  # shares the broker: never closed on its own


@pytest.fixture(scope="module")
def cluster_url() -> Iterator[str]:
    """A 3-master Redis Cluster for one test module's asynq-layout scripts."""
    with three_masters() as cluster:
        yield cluster.url


@pytest.fixture
async def cbroker(cluster_url: str, anyio_backend: object) -> AsyncIterator[AsynqBroker]:
    """An asynq-layout broker on that cluster."""
    broker: Any = make_broker(cluster_url, wire="asynq")
    try:
        yield broker
    finally:
        await broker.close()

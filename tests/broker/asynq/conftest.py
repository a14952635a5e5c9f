"""Fixtures of the wire=asynq broker tests: an AsynqBroker and a Client on one FakeClock over the
shared test Redis, and helpers reading asynq's records as Go would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

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

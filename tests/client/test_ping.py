"""``Client.ping()`` / ``Inspector.ping()``: a host application's readiness check — the round
trip in seconds while Redis answers, BrokerError saying why once it does not."""

from __future__ import annotations

import pytest

from asyncq import BrokerError, Client, Inspector
from asyncq._testing.redis_server import RedisServer

pytestmark = pytest.mark.anyio


async def test_ping_measures_the_round_trip_and_fails_while_redis_is_down(
    own_server: RedisServer,
) -> None:
    async with Client(own_server.url) as client, Inspector(own_server.url) as inspector:
        for checker in (client, inspector):
            seconds = await checker.ping()
            assert isinstance(seconds, float) and 0 < seconds < 5
        own_server.stop()
        for checker in (client, inspector):
            with pytest.raises(BrokerError, match="cannot reach Redis"):
                await checker.ping()
        own_server.start()
        for checker in (client, inspector):
            assert await checker.ping() > 0

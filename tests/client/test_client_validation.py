"""Client.enqueue refuses bad options before writing anything (item 53)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

from asyncq import (
    Client,
    FakeClock,
    Task,
)
from asyncq._broker import _keys as K
from tests.helpers.dataplane import (
    dt,
    queue_key_names,
    smembers,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ 53: validation


def _bad_calls(now: datetime) -> list[tuple[type[Exception], tuple[Any, ...], dict[str, Any]]]:
    naive = now.replace(tzinfo=None)
    return [
        (TypeError, (None,), {}),
        (TypeError, (42,), {}),
        (ValueError, ("",), {}),
        (ValueError, ("   ",), {}),
        (ValueError, ("t",), {"queue": ""}),
        (ValueError, ("t",), {"queue": "  "}),
        (ValueError, ("t",), {"queue": "a{b"}),
        (ValueError, ("t",), {"queue": "a}b"}),
        (ValueError, ("t",), {"queue": "a b"}),
        (ValueError, ("t",), {"queue": "a\tb"}),
        (TypeError, ("t",), {"queue": 5}),
        (ValueError, ("t",), {"task_id": ""}),
        (ValueError, ("t",), {"task_id": " \n"}),
        (ValueError, ("t",), {"group": ""}),
        (ValueError, ("t",), {"unique": 0.3}),
        (ValueError, ("t",), {"unique": timedelta(milliseconds=999)}),
        (ValueError, ("t",), {"unique": -5}),
        (ValueError, ("t",), {"unique_key": "k"}),  # a key needs a TTL
        (ValueError, ("t",), {"unique_key": " ", "unique": 10}),
        (ValueError, ("t",), {"timeout": -1}),
        (ValueError, ("t",), {"timeout": float("nan")}),
        (ValueError, ("t",), {"timeout": float("inf")}),
        (ValueError, ("t",), {"process_in": 1e300}),
        (ValueError, ("t",), {"max_retry": 2**64}),
        (ValueError, ("t",), {"retention": timedelta(seconds=-1)}),
        (ValueError, ("t",), {"process_in": -0.5}),
        (ValueError, ("t",), {"deadline": naive}),
        (ValueError, ("t",), {"process_at": naive}),
        (TypeError, ("t",), {"process_at": 1700000000}),
        (ValueError, ("t",), {"process_at": now, "process_in": 5}),
        (TypeError, ("t",), {"max_retry": "3"}),
        (TypeError, ("t",), {"max_retry": True}),
        (TypeError, ("t",), {"timeout": "10"}),
        (TypeError, ("t",), {"headers": {"k": 1}}),
        (TypeError, ("t",), {"headers": [("k", "v")]}),
        (TypeError, ("t",), {"retries": 3}),  # unknown option name
        (TypeError, ("t",), {"Queue": "x"}),
        (ValueError, ("t", object()), {}),  # payload that is not JSON-serialisable
        (TypeError, (Task("t"), b"payload"), {}),  # payload belongs in the Task
    ]


async def test_invalid_enqueue_calls_raise_and_write_nothing(
    client: Client, clock: FakeClock, redis_client: Redis, asyncq_queue: str
) -> None:
    for exc_type, args, kwargs in _bad_calls(dt(clock.now_ms())):
        kwargs.setdefault("queue", asyncq_queue)
        with pytest.raises(exc_type):
            await client.enqueue(*args, **kwargs)
    assert await queue_key_names(redis_client, asyncq_queue) == set()
    assert asyncq_queue not in await smembers(redis_client, K.QUEUES)


def test_invalid_task_options_raise_at_construction() -> None:
    with pytest.raises(ValueError, match="blank"):
        Task("t", queue=" ")
    with pytest.raises(ValueError, match="at least 1 second"):
        Task("t", unique=0.5)
    with pytest.raises(TypeError, match="unknown enqueue option"):
        Task("t", proces_in=5)



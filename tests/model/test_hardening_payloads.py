"""A payload JSON cannot hold exactly is refused, never silently changed."""

from __future__ import annotations

import math

import pytest

from asyncq import Client, Task

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("payload", [
    {"price": math.nan}, [1.0, math.inf], {"deep": {"list": [-math.inf]}},
], ids=["nan", "inf", "nested -inf"])
async def test_nan_and_infinities_are_refused_not_turned_into_null(
    asyncq_client: Client, asyncq_queue: str, payload: object,
) -> None:
    with pytest.raises(ValueError, match="JSON cannot represent"):
        await asyncq_client.enqueue("t", payload, queue=asyncq_queue)
    with pytest.raises(ValueError, match="JSON cannot represent"):
        Task("t", payload)
    assert await asyncq_client.enqueue("t", {"price": None}, queue=asyncq_queue)  # null is fine


async def test_non_string_keys_are_refused_so_they_cannot_collide(
    asyncq_client: Client, asyncq_queue: str,
) -> None:
    with pytest.raises(ValueError, match="dict with str keys"):
        await asyncq_client.enqueue("t", {1: "int", "1": "str"}, queue=asyncq_queue)
    with pytest.raises(ValueError, match="dict with str keys"):
        Task("t", {2: "x"})

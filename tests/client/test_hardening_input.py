"""Bad text in names, ids and headers: a ValueError (or TypeError for a non-str) saying what
is wrong, before anything is written."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from asyncq import Client, Task
from asyncq._broker import _keys as K

pytestmark = pytest.mark.anyio

SURROGATE = "file-\udcff"


@pytest.mark.parametrize("options", [
    {"task_id": SURROGATE}, {"group": SURROGATE}, {"unique": 60, "unique_key": SURROGATE},
    {"headers": {"h": SURROGATE}}, {"headers": {SURROGATE: "v"}},
], ids=["task_id", "group", "unique_key", "header value", "header name"])
async def test_a_lone_surrogate_is_a_value_error(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis, options: dict[str, object],
) -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        await asyncq_client.enqueue("t", queue=asyncq_queue, **options)
    with pytest.raises(ValueError, match="lone surrogate"):
        Task(SURROGATE)
    assert await redis_client.exists(K.QUEUES) == 0 or asyncq_queue.encode() not in \
        await redis_client.smembers(K.QUEUES)


@pytest.mark.parametrize("name", ["a\x00b", "line\nbreak", "esc\x1b[2J"])
async def test_control_characters_in_types_queues_ids_and_groups_are_refused(
    asyncq_client: Client, asyncq_queue: str, name: str,
) -> None:
    with pytest.raises(ValueError, match="control characters"):
        await asyncq_client.enqueue(name, queue=asyncq_queue)
    with pytest.raises(ValueError, match="control characters"):
        await asyncq_client.enqueue("t", queue=asyncq_queue + name)
    with pytest.raises(ValueError, match="control characters"):
        await asyncq_client.enqueue("t", queue=asyncq_queue, task_id=name)
    with pytest.raises(ValueError, match="control characters"):
        await asyncq_client.enqueue("t", queue=asyncq_queue, group=name)


async def test_bytes_for_a_type_says_to_decode_it(asyncq_client: Client) -> None:
    with pytest.raises(TypeError, match="got bytes b't': decode it first"):
        await asyncq_client.enqueue(b"t", b"")  # type: ignore[arg-type]


async def test_a_huge_queue_name_is_not_echoed_whole(asyncq_client: Client) -> None:
    with pytest.raises(ValueError) as info:
        await asyncq_client.enqueue("t", queue="q{" + "x" * 10_000)
    assert len(str(info.value)) < 300 and "characters)" in str(info.value)

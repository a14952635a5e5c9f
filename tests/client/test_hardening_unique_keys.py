"""Issue 12 item E (first half): the derived (type + payload) and the explicit (``unique_key``)
uniqueness key spaces never collide, so an unrelated task is never rejected as a duplicate."""

from __future__ import annotations

import pytest

from asyncq import Client, DuplicateTaskError, Task

pytestmark = pytest.mark.anyio


async def test_derived_and_explicit_unique_keys_do_not_collide(asyncq_client: Client,
                                                               asyncq_queue: str) -> None:
    q = asyncq_queue
    await asyncq_client.enqueue(Task("k:user42", queue=q, unique=60))
    # Unrelated: a different type with an explicit key that spells the derived one's name.
    await asyncq_client.enqueue(Task("mail", queue=q, unique=60, unique_key="user42:"))
    # Each space still refuses its own duplicates.
    with pytest.raises(DuplicateTaskError):
        await asyncq_client.enqueue(Task("k:user42", queue=q, unique=60))
    with pytest.raises(DuplicateTaskError):
        await asyncq_client.enqueue(Task("other", queue=q, unique=60, unique_key="user42:"))


async def test_derived_keys_of_types_with_colons_do_not_collide(asyncq_client: Client,
                                                                asyncq_queue: str) -> None:
    q = asyncq_queue
    await asyncq_client.enqueue(Task("a", b"x", queue=q, unique=60))
    digest = "9dd4e461268c8034f5c8564e155c67a6"  # md5(b"x")
    await asyncq_client.enqueue(Task(f"a:{digest}", queue=q, unique=60))
    await asyncq_client.enqueue(Task("a:", queue=q, unique=60))
    await asyncq_client.enqueue(Task("a", queue=q, unique=60))

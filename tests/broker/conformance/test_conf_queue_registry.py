"""A queue's registration survives ``delete_queue`` while a long-lived Client keeps
enqueueing to it, on every broker: each store says when its queue's marker was missing and
the client registers the queue again."""

from __future__ import annotations

import pytest

from asyncq import Client, Inspector, Task, TaskState
from asyncq._broker import Broker
from asyncq._model._info import TaskInfo

pytestmark = pytest.mark.anyio

ON_CLUSTER = True


async def visible(inspector: Inspector, queue: str, state: TaskState, n: int) -> None:
    assert queue in await inspector.queues()
    info = await inspector.queue_info(queue)
    assert getattr(info, state.value) == n
    assert len(await inspector.list_tasks(queue, state)) == n


@pytest.mark.parametrize("how", ["enqueue", "enqueue_many", "scheduled", "group"])
async def test_queue_stays_registered_after_delete_while_a_client_enqueues(
    how: str, client: Client, broker: Broker, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    state = {"scheduled": TaskState.SCHEDULED, "group": TaskState.AGGREGATING}.get(
        how, TaskState.PENDING)

    async def enqueue() -> None:
        if how == "enqueue_many":
            infos = await client.enqueue_many([Task("t", queue=q), Task("t", queue=q)])
            assert all(isinstance(i, TaskInfo) for i in infos)
        elif how == "scheduled":
            await client.enqueue(Task("t", queue=q, process_in=3600))
        elif how == "group":
            await client.enqueue(Task("t", queue=q, group="g"))
        else:
            await client.enqueue(Task("t", queue=q))

    async with Inspector(broker) as inspector:
        await enqueue()
        assert q in await inspector.queues()
        await inspector.delete_queue(q, force=True)
        assert q not in await inspector.queues()
        await enqueue()  # the same long-lived client
        assert q in await inspector.queues()
        if how != "group":
            await visible(inspector, q, state, 2 if how == "enqueue_many" else 1)
        else:
            assert [g.group for g in await inspector.groups(q)] == ["g"]

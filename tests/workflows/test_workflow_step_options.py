"""Options of a workflow step, set before or after the call: ``add.options(queue=q).s(1, 2)``
and ``add.s(1, 2).options(queue=q)`` are the same step."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis.asyncio

from asyncq import Client, Inspector, chain
from asyncq.testing import WorkerFactory
from tests.workflows.flowapp import add, mul, mux

pytestmark = pytest.mark.anyio
FAST = {"workflow_interval": 0.5, "forward_interval": 0.1}


async def _stored_steps(inspector: Inspector, workflow_id: str) -> list[tuple[object, ...]]:
    """What each step of a workflow was stored with: queue, type, retries, timeout,
    retention, headers (but the one naming its workflow)."""
    info = await inspector.workflow(workflow_id)
    steps = []
    for node in info.nodes:
        assert node.queue is not None and node.task_id is not None
        task = await inspector.task_info(node.queue, node.task_id)
        headers = {k: v for k, v in task.headers.items() if k != "asyncq-workflow"}
        steps.append((task.queue, task.type, task.max_retry, task.timeout, task.retention,
                      headers))
    return steps


async def test_options_after_the_call_are_the_options_before_it(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory, asyncq_client: Client,
        asyncq_redis_url: str, asyncq_queue: str) -> None:
    opts = {"queue": asyncq_queue, "max_retry": 3, "timeout": 7, "retention": 60,
            "headers": {"tenant": "a"}}
    after = chain(add.s(1, 2).options(**opts), mul.pipe(10).options(queue=asyncq_queue))
    before = chain(add.options(**opts).s(1, 2), mul.options(queue=asyncq_queue).pipe(10))
    flows = [await asyncq_client.enqueue_workflow(f) for f in (after, before)]
    async with Inspector(asyncq_redis_url) as inspector:
        stored = [await _stored_steps(inspector, f.id) for f in flows]
    assert stored[0] == stored[1]
    assert stored[0][0] == (asyncq_queue, "wf:add", 3, timedelta(seconds=7),
                            timedelta(seconds=60), {"tenant": "a"})
    # a worker serving only that queue runs both workflows to the end
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, **FAST):
        assert [await f.result(asyncq_client, timeout=30) for f in flows] == [30, 30]


def test_options_of_a_step_override_the_definitions_and_chain() -> None:
    step = add.options(queue="a", max_retry=1).s(1, 2).options(queue="b").options(timeout=3)
    assert step.overrides == {"queue": "b", "timeout": 3}
    assert step.task.queue == "a"  # the definition's own, which the overrides win over


@pytest.mark.parametrize(("options", "message"), [
    ({"process_in": 5}, "step 'wf:add': a workflow step cannot take process_in (it runs "
                        "when the steps before it are done"),
    ({"group": "g", "unique": 10}, "cannot take group, unique"),
    ({"queu": "x"}, "unknown enqueue option(s): queu"),
])
def test_an_option_a_step_cannot_take_is_refused_when_the_step_is_built(
        options: dict[str, object], message: str) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        add.s(1, 2).options(**options)  # type: ignore[arg-type]
    assert message in str(caught.value)


"""Workflows on every deployment (Cluster, Sentinel, TLS, ACL user); on a cluster with steps
in queues on every master, joined through the workflow's own slot (each script call stays in
one slot: the autouse slot checker fails the test otherwise)."""

from __future__ import annotations

import uuid

import pytest
from topology.cluster import LocalCluster

from asyncq import (
    Client,
    Inspector,
    ServeMux,
    Task,
    TaskFailedError,
    Worker,
    WorkflowState,
    chain,
    group,
)

from .conftest import Deployment
from .test_cluster import queues_on_each_master
from .test_deploy_events import mux as events_mux

pytestmark = pytest.mark.anyio


def mux() -> ServeMux:
    """The events suite's handlers ("double", "fail") plus "sum" for the fan-in."""
    m = events_mux()

    @m.handler("sum")
    async def total(task: Task) -> int:
        return sum(task.json())

    return m


async def run_flow(url: str, queues: list[str]) -> None:
    a, b, c = (queues * 3)[:3]
    flow = chain(Task("double", 1, queue=a),
                 group(Task("double", queue=b), Task("double", queue=c),
                       chain(Task("double", queue=a), Task("double", queue=b))),
                 Task("sum", queue=c))
    async with Client(url) as client, Inspector(url) as inspector, \
            Worker(url, mux(), queues=dict.fromkeys(queues, 1), concurrency=5,
                   workflow_interval=0.5):
        handle = await client.enqueue_workflow(flow)
        assert await client.result(handle.id, timeout=20) == 4 + 4 + 8
        info = await inspector.workflow(handle.id)
        assert info.state is WorkflowState.SUCCEEDED and info.done == 6
        failing = await client.enqueue_workflow(
            chain(Task("double", 1, queue=b), Task("fail", queue=c, max_retry=0),
                  Task("double", queue=a)))
        with pytest.raises(TaskFailedError, match="ValueError: no"):
            await client.result(failing.id, timeout=20)
        assert (await inspector.workflow(failing.id)).nodes[2].state == "waiting"


async def test_workflows_on_every_deployment(deployment: Deployment) -> None:
    await run_flow(deployment.url, [f"fl-{uuid.uuid4().hex[:8]}"])


async def test_workflow_steps_on_every_master_of_a_cluster(cluster: LocalCluster) -> None:
    queues = list(queues_on_each_master(cluster).values())
    await run_flow(cluster.url, queues)

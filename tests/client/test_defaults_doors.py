"""One set of task defaults whatever the door: the same task enqueued through the Client, a
Task, ``enqueue_many``, the SyncClient, a typed task (async and sync clients), ``asyncq task
enqueue``, a Scheduler's firing, a workflow step and ``enqueue(after=...)`` is stored with the
same options, read back through the Inspector against a live worker that publishes its
registrations: the defaults for a type nobody registered, the registration's task options for
a registered one, and what the call gave when it gave options (they win over both)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import anyio
import orjson
import pytest
from anyio import to_thread

from asyncq import (
    Client,
    Inspector,
    PeriodicTaskConfig,
    PeriodicTaskManager,
    Scheduler,
    ServeMux,
    SyncClient,
    Task,
    TaskInfo,
    TaskState,
    WaitTimeoutError,
)
from asyncq import _defaults as D
from asyncq._typed._definition import TaskDefinition
from asyncq._workflow._start import WORKFLOW_HEADER
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio

PLAIN = "defaults:plain"  # registered by no worker
REGISTERED = "defaults:registered"
REGISTRATION = {"max_retry": 3, "timeout": 7, "retention": 90, "expires_in": 300}
CALL = {"max_retry": 1, "timeout": 2, "retention": 3, "expires_in": 60}

served = ServeMux()


@served.task(REGISTERED, **REGISTRATION)
async def registered(n: int) -> int:
    return n


unserved = ServeMux()  # no worker runs it: the typed door of a type nobody registered


@unserved.task(PLAIN)
async def plain(n: int) -> int:
    return n


TYPED: dict[str, TaskDefinition[[int], int]] = {PLAIN: plain, REGISTERED: registered}
PAYLOAD = {"n": 1}


class Door:
    """What a door needs: the test's Redis, client and queue; ``enqueue`` returns the id of
    the task it stored (the one to inspect)."""

    def __init__(self, url: str, client: Client, sync: SyncClient, queue: str) -> None:
        self.url, self.client, self.sync, self.queue = url, client, sync, queue


Enqueue = Callable[[Door, str, dict[str, Any]], Awaitable[str]]


async def by_client(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    return (await d.client.enqueue(task_type, PAYLOAD, queue=d.queue, **opts)).id


async def by_task(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    return (await d.client.enqueue(Task(task_type, PAYLOAD, queue=d.queue, **opts))).id


async def by_enqueue_many(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    [info] = await d.client.enqueue_many([Task(task_type, PAYLOAD, queue=d.queue, **opts)])
    assert isinstance(info, TaskInfo), info
    return info.id


async def by_sync_client(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    info = await to_thread.run_sync(
        lambda: d.sync.enqueue(task_type, PAYLOAD, queue=d.queue, **opts))
    return info.id


async def by_typed(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    definition = TYPED[task_type].options(queue=d.queue, **opts)
    return (await definition.enqueue(d.client, PAYLOAD["n"])).id


async def by_typed_sync(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    definition = TYPED[task_type].options(queue=d.queue, **opts)
    info = await to_thread.run_sync(lambda: definition.enqueue(d.sync, PAYLOAD["n"]))
    return info.id


async def by_cli(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    flags = [f for name, value in opts.items()
             for f in (f"--{name.replace('_', '-')}", str(value))]
    proc = await anyio.run_process(
        [sys.executable, "-m", "asyncq", "task", "enqueue", "--redis-url", d.url, "-t",
         task_type, "-l", orjson.dumps(PAYLOAD).decode(), "-q", d.queue, "--json", *flags],
        check=False, stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr.decode()
    doc: dict[str, Any] = orjson.loads(proc.stdout)
    return str(doc["id"])


async def by_scheduler(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    scheduler = Scheduler(broker=d.client.broker)
    scheduler.register("@every 1h", task_type, PAYLOAD, queue=d.queue, **opts)
    [entry] = scheduler.entries()
    [info] = await scheduler.tick(now=entry.next_enqueue_at)
    return info.id


async def by_periodic(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    config = PeriodicTaskConfig("@every 1h", task_type, PAYLOAD, {"queue": d.queue, **opts})
    manager = PeriodicTaskManager(broker=d.client.broker, provider=lambda: [config])
    await manager.sync()
    [entry] = manager.scheduler.entries()
    [info] = await manager.scheduler.tick(now=entry.next_enqueue_at)
    return info.id


async def by_apply(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    """``apply`` enqueues, then waits for a result that never comes (the queue is paused);
    its ``timeout=`` bounds the wait, so the task's own goes in the Task."""
    with pytest.raises(WaitTimeoutError) as waited:
        await d.client.apply(Task(task_type, PAYLOAD, queue=d.queue, **opts), timeout=0.5)
    assert waited.value.info is not None
    return waited.value.info.id


async def by_workflow(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    await d.client.enqueue_workflow(Task(task_type, PAYLOAD, queue=d.queue, **opts))
    inspector = Inspector(d.client.broker)
    [info] = await inspector.list_tasks(d.queue, TaskState.PENDING)
    return info.id


async def by_after(d: Door, task_type: str, opts: dict[str, Any]) -> str:
    first = await d.client.enqueue("defaults:first", queue=d.queue)
    return (await d.client.enqueue(task_type, PAYLOAD, queue=d.queue, after=[first],
                                   **opts)).id


DOORS: dict[str, Enqueue] = {
    "client": by_client, "task": by_task, "enqueue_many": by_enqueue_many,
    "sync_client": by_sync_client, "typed": by_typed, "typed_sync": by_typed_sync,
    "cli": by_cli, "scheduler": by_scheduler, "periodic": by_periodic,
    "workflow": by_workflow, "after": by_after, "apply": by_apply,
}


def applied(info: TaskInfo) -> dict[str, Any]:
    """The options a task is stored with, as the Inspector shows them (those that apply);
    the expiry relative to the enqueue time, the workflow's own header left out."""
    assert info.enqueued_at is not None
    return {
        "type": info.type, "queue": info.queue, "payload": orjson.loads(info.payload),
        "max_retry": info.max_retry, "timeout": info.timeout, "retention": info.retention,
        "deadline": info.deadline, "group": info.group,
        "expires_in": None if info.expires_at is None else info.expires_at - info.enqueued_at,
        "headers": {k: v for k, v in info.headers.items() if k != WORKFLOW_HEADER},
    }


def expected(task_type: str, queue: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """What every door must store: the call's options, else the registration's, else the
    defaults of asyncq/_defaults.py."""
    if options is not None:
        rules = options
    elif task_type == REGISTERED:
        rules = REGISTRATION
    else:
        rules = {"max_retry": D.DEFAULT_MAX_RETRY, "timeout": D.DEFAULT_TIMEOUT_MS / 1000,
                 "retention": D.RESULT_RETENTION, "expires_in": None}
    expires = rules["expires_in"]
    return {
        "type": task_type, "queue": queue, "payload": PAYLOAD,
        "max_retry": rules["max_retry"], "timeout": timedelta(seconds=rules["timeout"]),
        "retention": timedelta(seconds=rules["retention"]), "deadline": None, "group": None,
        "expires_in": None if expires is None else timedelta(seconds=expires), "headers": {},
    }


@pytest.fixture
async def door(asyncq_redis_url: str, asyncq_queue: str,
               asyncq_worker: WorkerFactory) -> AsyncIterator[Door]:
    """A live worker serving the queue (paused: it publishes its registrations but runs
    nothing), a Client and a SyncClient."""
    async with Client(asyncq_redis_url) as client, Inspector(client.broker) as inspector:
        await client.enqueue("defaults:first", queue=asyncq_queue)  # (the queue exists)
        await inspector.pause(asyncq_queue)
        await inspector.delete_all(asyncq_queue, TaskState.PENDING)
        async with asyncq_worker(served, queues={asyncq_queue: 1}, heartbeat_interval=0.2):
            await wait_until(lambda: _published(inspector), message="registrations published")
            with SyncClient(asyncq_redis_url) as sync:
                yield Door(asyncq_redis_url, client, sync, asyncq_queue)


async def _published(inspector: Inspector) -> bool:
    return any(REGISTERED in s.task_options for s in await inspector.workers())


@pytest.mark.parametrize("options", [None, CALL], ids=["no-options", "call-options"])
@pytest.mark.parametrize("task_type", [PLAIN, REGISTERED], ids=["unregistered", "registered"])
@pytest.mark.parametrize("name", list(DOORS))
async def test_every_door_stores_the_same_options(door: Door, name: str, task_type: str,
                                                  options: dict[str, Any] | None) -> None:
    task_id = await DOORS[name](door, task_type, dict(options or {}))
    async with Inspector(door.client.broker) as inspector:
        info = await inspector.task_info(door.queue, task_id)
    assert applied(info) == expected(task_type, door.queue, options)

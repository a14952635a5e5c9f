"""The interop scenarios, written once over a producer (Go's client or asyncq's) and a consumer
(Go's server or an asyncq worker) on the asynq layout, with Go's Inspector as the referee.

``test_go_to_asyncq`` runs them Go client -> asyncq worker, and Go client -> Go server as the
baseline that proves each assertion is asynq's own behaviour; ``test_asyncq_to_go`` runs them
asyncq client -> Go server. Every run is in a ledger (the Go server's, or
``asyncqpeer.recording_mux``'s, same shape), asserted exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pytest
from asyncqpeer import aggregate, asynq_url, recording_mux
from asyncqpeer import wait_ends as asyncq_wait_ends
from asyncqpeer import wait_starts as asyncq_wait_starts
from goharness import GoPrograms, InspectorError, Ledger, gen_payload, sha256_hex, spec

from asyncq import (
    AsyncqError,
    Client,
    DuplicateTaskError,
    Inspector,
    Task,
    TaskIDConflictError,
    Worker,
)
from asyncq.testing import wait_until

#: The Go client's defaults (asynq's): 25 retries, a 30-minute timeout when none is given.
GO_MAX_RETRY = 25
GO_TIMEOUT = 1800.0

# ---------------------------------------------------------------- producers


@dataclass(frozen=True)
class TaskSpec:
    """One task to enqueue, whichever client: seconds for durations, Unix seconds for
    ``deadline`` and ``process_at``."""

    type: str
    payload: bytes = b""
    queue: str | None = None
    max_retry: int | None = None
    timeout: float | None = None
    deadline: float | None = None
    process_in: float | None = None
    process_at: float | None = None
    unique: float | None = None
    task_id: str | None = None
    group: str | None = None
    retention: float | None = None
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class Enqueued:
    """What a client answered for one TaskSpec: the task's id and state, or the kind of
    refusal (``duplicate_task``, ``task_id_conflict``)."""

    id: str | None
    kind: str | None = None
    state: str | None = None
    next_process_at: float | None = None


class Producer(Protocol):
    name: str

    async def enqueue(self, specs: Sequence[TaskSpec]) -> list[Enqueued]: ...

    async def enqueue_generated(self, n: int, type: str, queue: str, size: int,
                                seed: str) -> list[str]: ...


@dataclass
class GoProducer:
    """Go's asynq Client (the producer program)."""

    go: GoPrograms
    url: str
    name: str = "go"

    async def enqueue(self, specs: Sequence[TaskSpec]) -> list[Enqueued]:
        docs = [spec(s.type, payload=s.payload, queue=s.queue, max_retry=s.max_retry,
                     timeout=s.timeout, deadline=s.deadline, process_in=s.process_in,
                     process_at=s.process_at, unique=s.unique, task_id=s.task_id,
                     group=s.group, retention=s.retention, headers=s.headers)
                for s in specs]
        for i, doc in enumerate(docs):
            doc["i"] = i
        run = await self.go.produce(self.url, specs=docs)
        out: dict[int, Enqueued] = {}
        for e in run.enqueued:
            t = e["task"]
            out[e["i"]] = Enqueued(t["id"], None, t["state"], t["next_process_at"])
        for e in run.errors:
            out[e["i"]] = Enqueued(None, e["kind"])
        return [out[i] for i in range(len(specs))]

    async def enqueue_generated(self, n: int, type: str, queue: str, size: int,
                                seed: str) -> list[str]:
        run = await self.go.produce(self.url, "-n", str(n), "-type", type, "-queue", queue,
                                    "-payload-size", str(size), "-seed", seed,
                                    "-concurrency", "8", timeout=600)
        assert run.errors == []
        return run.ids


def _kind(exc: AsyncqError) -> str:
    if isinstance(exc, DuplicateTaskError):
        return "duplicate_task"
    if isinstance(exc, TaskIDConflictError):
        return "task_id_conflict"
    raise exc


def _asyncq_options(s: TaskSpec) -> dict[str, Any]:
    opts: dict[str, Any] = {name: getattr(s, name) for name in (
        "queue", "max_retry", "timeout", "process_in", "unique", "task_id", "group",
        "retention", "headers") if getattr(s, name) is not None}
    for name in ("deadline", "process_at"):
        value = getattr(s, name)
        if value is not None:
            opts[name] = datetime.fromtimestamp(value, UTC)
    return opts


@dataclass
class AsyncqProducer:
    """asyncq's Client on the asynq layout (``?wire=asynq``)."""

    url: str
    name: str = "asyncq"

    async def enqueue(self, specs: Sequence[TaskSpec]) -> list[Enqueued]:
        out = []
        async with Client(asynq_url(self.url)) as client:
            for s in specs:
                try:
                    info = await client.enqueue(s.type, s.payload, **_asyncq_options(s))
                except (DuplicateTaskError, TaskIDConflictError) as exc:
                    if isinstance(exc, DuplicateTaskError):
                        # The error names the lock by the key a Go client uses (whoever
                        # took it): asynq:{q}:unique:<type>:<md5 of the payload>.
                        digest = hashlib.md5(s.payload, usedforsecurity=False).hexdigest()
                        assert f"lock asynq:{{{s.queue}}}:unique:{s.type}:{digest}," in str(exc)
                    out.append(Enqueued(None, _kind(exc)))
                    continue
                due = info.next_process_at
                out.append(Enqueued(info.id, None, info.state.value,
                                    due.timestamp() if due is not None else None))
        return out

    async def enqueue_generated(self, n: int, type: str, queue: str, size: int,
                                seed: str) -> list[str]:
        ids: list[str] = []
        async with Client(asynq_url(self.url)) as client:
            for start in range(0, n, 500):
                batch = [Task(type, gen_payload(seed, i, size), queue=queue)
                         for i in range(start, min(n, start + 500))]
                for result in await client.enqueue_many(batch):
                    if isinstance(result, AsyncqError):
                        raise result
                    ids.append(result.id)
        return ids


# ---------------------------------------------------------------- consumers


@dataclass(frozen=True)
class Setup:
    """How a consumer is configured, whichever it is (short intervals where each allows)."""

    queues: dict[str, int]
    concurrency: int = 10
    strict: bool = False
    aggregate: bool = False
    group_grace: float = 1.0


class Running(Protocol):
    @property
    def pid(self) -> int: ...

    def ledger(self) -> Ledger: ...

    async def wait_ends(self, n: int, timeout: float = 60.0) -> Ledger: ...

    async def wait_starts(self, n: int, timeout: float = 60.0) -> Ledger: ...


@dataclass
class AsyncqRunning:
    book: Ledger = field(default_factory=Ledger)

    @property
    def pid(self) -> int:
        return os.getpid()

    def ledger(self) -> Ledger:
        return self.book

    async def wait_ends(self, n: int, timeout: float = 60.0) -> Ledger:
        return await asyncq_wait_ends(self.book, n, timeout)

    async def wait_starts(self, n: int, timeout: float = 60.0) -> Ledger:
        return await asyncq_wait_starts(self.book, n, timeout)


def _no_delay(retried: int, error: BaseException, task: Any) -> float:
    return 0.0


class Consumer(Protocol):
    name: str

    def run(self, setup: Setup) -> Any: ...


@dataclass
class AsyncqConsumer:
    """An in-process asyncq worker on the asynq layout running the recording handlers."""

    url: str
    name: str = "asyncq"

    @asynccontextmanager
    async def run(self, setup: Setup) -> AsyncIterator[Running]:
        running = AsyncqRunning()
        config: dict[str, Any] = {
            "queues": setup.queues, "concurrency": setup.concurrency,
            "strict_priority": setup.strict, "forward_interval": 0.1,
            "retry_delay": _no_delay, "shutdown_timeout": 5.0, "heartbeat_interval": 1.0}
        if setup.aggregate:
            config.update(group_aggregator=aggregate, group_grace_period=setup.group_grace)
        async with Worker(asynq_url(self.url), recording_mux(running.book), **config):
            yield running


@dataclass
class GoConsumer:
    """Go's asynq Server (the server program) with the same behaviours and ledger."""

    go: GoPrograms
    url: str
    workdir: Path
    name: str = "go"

    @asynccontextmanager
    async def run(self, setup: Setup) -> AsyncIterator[Running]:
        flags = ["-queues", ",".join(f"{q}={w}" for q, w in setup.queues.items()),
                 "-concurrency", str(setup.concurrency), "-delayed-check", "100ms",
                 "-retry-delay", "0s", "-shutdown-timeout", "5s"]
        if self.go.version != "v0.24.1":
            flags += ["-task-check-interval", "100ms"]
        if setup.strict:
            flags.append("-strict")
        if setup.aggregate:
            flags += ["-aggregate", "-group-grace", f"{round(setup.group_grace * 1000)}ms"]
        async with self.go.server(self.url, self.workdir, *flags) as server:
            yield server
            await server.stop()


# ---------------------------------------------------------------- helpers


async def task_info(go: GoPrograms, url: str, queue: str, task_id: str) -> dict[str, Any]:
    info: dict[str, Any] = await go.inspect(url, "task", "-queue", queue, "-id", task_id)
    return info


async def state_is(go: GoPrograms, url: str, queue: str, task_id: str, state: str) -> bool:
    return bool((await task_info(go, url, queue, task_id))["state"] == state)


async def wait_state(go: GoPrograms, url: str, queue: str, task_id: str, state: str,
                     timeout: float = 15.0) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        info = await task_info(go, url, queue, task_id)
        return info if info["state"] == state else None

    result: dict[str, Any] = await wait_until(reached, timeout=timeout,
                                              message=f"{task_id} {state}")
    return result


# ---------------------------------------------------------------- the scenarios


async def bulk_exact(producer: Producer, consumer: Consumer, go: GoPrograms, url: str,
                     queue: str, n: int, size: int = 100) -> None:
    """n tasks with distinct binary payloads: each runs exactly once with its exact bytes and
    the asynq defaults (25 retries, 30-minute timeout); asynq's counters agree."""
    seed = f"bulk-{producer.name}"
    ids = await producer.enqueue_generated(n, "ok", queue, size, seed)
    assert len(ids) == n == len(set(ids))
    assert (await go.inspect(url, "queue", "-queue", queue))["pending"] == n
    async with consumer.run(Setup({queue: 1}, concurrency=50)) as running:
        ledger = await running.wait_ends(n, timeout=max(60.0, n / 50))
    expected = {task_id: sha256_hex(gen_payload(seed, i, size)) for i, task_id in enumerate(ids)}
    runs = ledger.ends_by_id()
    assert set(runs) == set(expected), "lost or foreign tasks"
    assert [i for i, r in runs.items() if len(r) != 1] == [], "tasks ran more than once"
    assert {i: r[0]["payload_sha256"] for i, r in runs.items()} == expected
    assert ledger.outcomes() == {"ok": n}
    assert {(e["type"], e["queue"], e["retried"], e["max_retry"]) for e in ledger.ends} == {
        ("ok", queue, 0, GO_MAX_RETRY)}
    # the 30-minute default timeout was stored and bounds every run
    assert all(abs(e["deadline"] - e["started"] - GO_TIMEOUT) < 60 for e in ledger.ends)
    info = await go.inspect(url, "queue", "-queue", queue)
    assert (info["pending"], info["active"], info["retry"], info["archived"]) == (0, 0, 0, 0)
    assert (info["processed"], info["failed"]) == (n, 0)
    assert await go.inspect(url, "queues") == [queue]


EDGE_PAYLOADS = [b"", b"\x00", bytes(range(256)), b'{"a": 1}', b"\xff\xfe not utf-8",
                 gen_payload("edge", 0, 1 << 20)]


async def payload_edges(producer: Producer, consumer: Consumer, url: str, queue: str,
                        headers: dict[str, str] | None,
                        seen: dict[str, str] | None = None) -> None:
    """Empty, NUL, every byte value, JSON text, invalid UTF-8 and 1 MiB payloads arrive byte
    for byte; the ``headers`` sent arrive as ``seen`` (default: the same; none where the
    consumer predates them, asynq < v0.26, which skips the unknown field)."""
    enq = await producer.enqueue([TaskSpec(f"ok:edge{i}", p, queue=queue, headers=headers)
                                  for i, p in enumerate(EDGE_PAYLOADS)])
    assert [e.kind for e in enq] == [None] * len(EDGE_PAYLOADS)
    async with consumer.run(Setup({queue: 1})) as running:
        ledger = await running.wait_ends(len(EDGE_PAYLOADS))
    by_type = {e["type"]: e for e in ledger.ends}
    assert set(by_type) == {f"ok:edge{i}" for i in range(len(EDGE_PAYLOADS))}
    for i, p in enumerate(EDGE_PAYLOADS):
        end = by_type[f"ok:edge{i}"]
        assert (end["id"], end["payload_len"], end["payload_sha256"], end["outcome"]) == (
            enq[i].id, len(p), sha256_hex(p), "ok")
        assert end["headers"] == (headers if seen is None else seen or None)


async def retried_then_archived(producer: Producer, consumer: Consumer, go: GoPrograms,
                                url: str, queue: str) -> None:
    """fail: retried to its max, then archived with its error; failn:2 succeeds on its third
    run and is deleted (no retention); skip (SkipRetry) archived after one run; Go's
    Inspector runs an archived task again, retry count kept. asynq's counters agree."""
    enq = await producer.enqueue([
        TaskSpec("fail", b"f", queue=queue, max_retry=2, task_id="fail"),
        TaskSpec("failn:2", b"n", queue=queue, max_retry=5, task_id="failn"),
        TaskSpec("skip", b"s", queue=queue, max_retry=5, task_id="skip"),
    ])
    assert [e.id for e in enq] == ["fail", "failn", "skip"]
    async with consumer.run(Setup({queue: 1})) as running:
        await running.wait_ends(3 + 3 + 1)
        fail = await wait_state(go, url, queue, "fail", "archived")
        skip = await wait_state(go, url, queue, "skip", "archived")
        assert await go.inspect(url, "run", "-queue", queue, "-id", "fail") is None
        ledger = await running.wait_ends(3 + 3 + 1 + 1)
        await wait_state(go, url, queue, "fail", "archived")
    runs = ledger.ends_by_id()
    assert [(r["retried"], r["outcome"]) for r in runs["fail"]] == [
        (0, "error"), (1, "error"), (2, "error"), (2, "error")]
    assert [(r["retried"], r["outcome"]) for r in runs["failn"]] == [
        (0, "error"), (1, "error"), (2, "ok")]
    assert [(r["retried"], r["outcome"]) for r in runs["skip"]] == [(0, "skip")]
    assert (fail["retried"], fail["max_retry"]) == (2, 2)
    # The same failure reads the same on both sides: the handler's error text alone, as a Go
    # handler's error reads (asyncq keeps the exception type in its own field).
    assert fail["last_err"] == "fail: the handler failed on purpose"
    assert fail["last_failed_at"] is not None
    assert "no retry on purpose" in skip["last_err"]
    async with Inspector(asynq_url(url)) as inspector:
        seen = (await inspector.task_info(queue, "fail")).last_error
    assert seen == ("RuntimeError: fail: the handler failed on purpose"
                    if isinstance(consumer, AsyncqConsumer)
                    else "fail: the handler failed on purpose")
    with pytest.raises(InspectorError) as gone:
        await task_info(go, url, queue, "failn")
    assert gone.value.kind == "task_not_found"
    info = await go.inspect(url, "queue", "-queue", queue)
    assert (info["archived"], info["completed"], info["retry"], info["pending"]) == (2, 0, 0, 0)
    assert (info["processed"], info["failed"]) == (8, 7)


async def scheduled(producer: Producer, consumer: Consumer, go: GoPrograms, url: str,
                    queue: str) -> None:
    """ProcessIn / ProcessAt: listed as scheduled with their time, run when due, not before."""
    at = time.time() + 3
    enq = await producer.enqueue([
        TaskSpec("ok:in", queue=queue, process_in=2, task_id="in"),
        TaskSpec("ok:at", queue=queue, process_at=at, task_id="at"),
    ])
    assert [(e.id, e.state) for e in enq] == [("in", "scheduled"), ("at", "scheduled")]
    due = {e.id: e.next_process_at for e in enq}
    listed = await go.inspect(url, "tasks", "-queue", queue, "-state", "scheduled")
    assert {t["id"]: t["next_process_at"] for t in listed} == pytest.approx(due, abs=1)
    assert listed[0]["next_process_at"] is not None
    async with consumer.run(Setup({queue: 1})) as running:
        ledger = await running.wait_ends(2, timeout=30)
    for end in ledger.ends:
        # asynq keeps whole seconds: never before that second, promptly after it
        when = {"in": at - 1, "at": at}[end["id"]]
        assert int(when) <= end["started"] <= when + 3, end
    assert ledger.outcomes() == {"ok": 2}


async def unique_and_task_ids(first: Producer, second: Producer, consumer: Consumer,
                              url: str, queue: str) -> None:
    """A uniqueness lock (asynq's key: MD5 of type and payload, per queue) and a task id
    taken by one client refuse the other client's enqueue; success releases the lock."""
    uniq = TaskSpec("ok:uniq", b"same\x00bytes", queue=queue, unique=60)
    fixed = TaskSpec("ok:fixed", queue=queue, task_id="fixed")
    other = TaskSpec("ok:uniq", b"other", queue=queue, unique=60)
    made = await first.enqueue([uniq, uniq, fixed])
    assert [e.kind for e in made] == [None, "duplicate_task", None]
    refused = await second.enqueue([uniq, fixed, other])
    assert [e.kind for e in refused] == ["duplicate_task", "task_id_conflict", None]
    async with consumer.run(Setup({queue: 1})) as running:
        ledger = await running.wait_ends(3)
    assert Counter(e["id"] for e in ledger.ends) == Counter(
        {made[0].id: 1, "fixed": 1, refused[2].id: 1})
    again = await second.enqueue([uniq])
    assert [e.kind for e in again] == [None]
    assert [e.kind for e in await first.enqueue([uniq])] == ["duplicate_task"]


async def groups(producer: Producer, consumer: Consumer, go: GoPrograms, url: str,
                 queue: str) -> None:
    """Grouped tasks wait as aggregating (Go's Inspector lists the groups), then the
    consumer's aggregator makes one task of each group, every member's payload in it."""
    members = {"g1": [gen_payload("g1", i, 16) for i in range(5)],
               "g2": [gen_payload("g2", i, 16) for i in range(3)]}
    enq = await producer.enqueue([TaskSpec("ok:member", p, queue=queue, group=g)
                                  for g, ps in members.items() for p in ps])
    assert {e.state for e in enq} == {"aggregating"}
    assert await go.inspect(url, "groups", "-queue", queue) == [
        {"group": "g1", "size": 5}, {"group": "g2", "size": 3}]
    listed = await go.inspect(url, "tasks", "-queue", queue, "-state", "aggregating",
                              "-group", "g1")
    assert sorted(t["payload_hex"] for t in listed) == sorted(p.hex() for p in members["g1"])
    async with consumer.run(Setup({queue: 1}, aggregate=True)) as running:
        ledger = await running.wait_ends(2, timeout=30)
    assert [e["type"] for e in ledger.ends] == ["aggregated", "aggregated"]
    made = [json.loads(bytes.fromhex(e["payload_hex"])) for e in ledger.ends]
    assert {d["group"]: sorted(d["payloads_hex"]) for d in made} == {
        g: sorted(p.hex() for p in ps) for g, ps in members.items()}
    assert await go.inspect(url, "groups", "-queue", queue) == []
    info = await go.inspect(url, "queue", "-queue", queue)
    assert (info["aggregating"], info["pending"], info["groups"]) == (0, 0, 0)


async def timeout_and_deadline(producer: Producer, consumer: Consumer, go: GoPrograms,
                               url: str, queue: str) -> None:
    """A 1 s timeout and a deadline 1.5 s away stop handlers that would run 20 s; with no
    retry left both are archived."""
    deadline = time.time() + 1.5
    enq = await producer.enqueue([
        TaskSpec("sleep:20000", queue=queue, timeout=1, max_retry=0, task_id="timeout"),
        TaskSpec("sleep:20000", queue=queue, deadline=deadline, max_retry=0,
                 task_id="deadline"),
    ])
    assert [e.id for e in enq] == ["timeout", "deadline"]
    async with consumer.run(Setup({queue: 1})) as running:
        ledger = await running.wait_ends(2, timeout=20)
        for task_id in ("timeout", "deadline"):
            info = await wait_state(go, url, queue, task_id, "archived")
            assert info["last_err"] != ""
    runs = {e["id"]: e for e in ledger.ends}
    assert {i: r["outcome"] for i, r in runs.items()} == {
        "timeout": "deadline_exceeded", "deadline": "deadline_exceeded"}
    assert 0.9 <= runs["timeout"]["elapsed_s"] < 15  # stopped, not the 20 s run
    assert runs["deadline"]["ended"] < deadline + 15  # stopped, not the 20 s run


async def servers_and_cancel(producer: Producer, consumer: Consumer, go: GoPrograms,
                             url: str, queue: str) -> None:
    """Go's Inspector lists the consumer as a server with its running tasks (id, type,
    payload, queue, times), and CancelProcessing stops them; with no retry left they are
    archived. The server entry is gone after a graceful stop."""
    enq = await producer.enqueue([TaskSpec("hang", b"\x00\xff\x10", queue=queue, max_retry=0)
                                  for _ in range(2)])
    ids = [e.id for e in enq if e.id is not None]
    assert len(ids) == 2
    async with consumer.run(Setup({queue: 2}, concurrency=3)) as running:
        await running.wait_starts(2)

        async def listed() -> list[dict[str, Any]] | None:
            servers = await go.inspect(url, "servers")
            mine = [s for s in servers if s["pid"] == running.pid]
            return mine if mine and len(mine[0]["active_workers"]) == 2 else None

        [server] = await wait_until(listed, timeout=15, message="consumer listed by Go")
        assert (server["concurrency"], server["queues"], server["status"]) == (
            3, {queue: 2}, "active")
        assert sorted(w["task_id"] for w in server["active_workers"]) == sorted(ids)
        assert {(w["task_type"], w["payload_hex"], w["queue"])
                for w in server["active_workers"]} == {("hang", "00ff10", queue)}
        assert all(w["started"] and w["deadline"] for w in server["active_workers"])
        active = await go.inspect(url, "tasks", "-queue", queue, "-state", "active")
        assert sorted(t["id"] for t in active) == sorted(ids)

        victim, other = ids
        assert await go.inspect(url, "cancel", "-id", victim) is None
        ledger = await running.wait_ends(1, timeout=15)
        assert [(e["id"], e["outcome"]) for e in ledger.ends] == [(victim, "canceled")]
        await wait_state(go, url, queue, victim, "archived")
        assert await state_is(go, url, queue, other, "active")
        await go.inspect(url, "cancel", "-id", other)
        ledger = await running.wait_ends(2, timeout=15)
        pid = running.pid
    assert ledger.outcomes() == {"canceled": 2}
    servers = await go.inspect(url, "servers")
    assert [s for s in servers if s["pid"] == pid] == [], "left its server entry"


async def pause(producer: Producer, consumer: Consumer, go: GoPrograms, url: str,
                queue: str) -> None:
    """A queue paused through Go's Inspector is not served until unpaused."""
    high, low = f"{queue}-high", f"{queue}-low"
    await producer.enqueue([TaskSpec("ok:high", queue=high) for _ in range(3)])
    assert await go.inspect(url, "pause", "-queue", high) is None
    await producer.enqueue([TaskSpec("ok:low", queue=low)])
    async with consumer.run(Setup({high: 10, low: 1}, concurrency=1, strict=True)) as running:
        # one slot and strict priority: the low task runs first only if high is not served
        ledger = await running.wait_ends(1)
        assert [e["type"] for e in ledger.starts] == ["ok:low"]
        info = await go.inspect(url, "queue", "-queue", high)
        assert (info["paused"], info["pending"]) == (True, 3)
        await go.inspect(url, "unpause", "-queue", high)
        ledger = await running.wait_ends(4)
    assert Counter(e["type"] for e in ledger.ends) == {"ok:low": 1, "ok:high": 3}


#: Queue names Go accepts that asyncq's own layout refuses (issue 40, item 2).
ODD_QUEUES = ("we{ird} x", "star*q")


async def odd_queue_names(producer: Producer, consumer: Consumer, go: GoPrograms,
                          url: str) -> None:
    """Tasks in queues named with braces, a space or a '*' run once each, the consumer
    serving them by name (an asyncq worker writes the '*' as '\\*'); Go's Inspector counts
    them processed."""
    enq = await producer.enqueue([TaskSpec("ok:odd", str(i).encode(), queue=q)
                                  for q in ODD_QUEUES for i in range(3)])
    assert all(e.kind is None for e in enq)
    served = {q.replace("*", "\\*") if isinstance(consumer, AsyncqConsumer) else q: 1
              for q in ODD_QUEUES}
    async with consumer.run(Setup(served)) as running:
        ledger = await running.wait_ends(len(enq))
    assert Counter(e["queue"] for e in ledger.ends) == {q: 3 for q in ODD_QUEUES}
    assert sorted(e["id"] for e in ledger.ends) == sorted(e.id for e in enq if e.id)
    for q in ODD_QUEUES:
        info = await go.inspect(url, "queue", "-queue", q)
        assert (info["pending"], info["active"], info["processed"]) == (0, 0, 3)

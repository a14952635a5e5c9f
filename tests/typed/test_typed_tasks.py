"""Typed task definitions (@mux.task) against a real Redis and worker: arguments bound and
checked at enqueue, decoded to their annotated types in the handler, typed results."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from decimal import Decimal
from typing import Any, Literal

import pydantic
import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, TaskFailedError, TaskState
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory

pytestmark = pytest.mark.anyio


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Address:
    street: str
    number: int


@dataclasses.dataclass
class Receipt:
    to: str
    sent_at: dt.datetime
    ids: list[uuid.UUID]
    address: Address | None = None


class Invoice(pydantic.BaseModel):
    number: int
    amount: Decimal
    lines: list[str]


@dataclasses.dataclass
class Everything:
    """Every supported type, as one value: what a handler received, returned as its result."""
    s: str
    i: int
    f: float
    b: bool
    none: None
    raw: bytes
    when: dt.datetime
    day: dt.date
    at: dt.time
    span: dt.timedelta
    ident: uuid.UUID
    money: Decimal
    color: Color
    mode: Literal["fast", "slow"]
    items: list[int]
    pair: tuple[str, int]
    tags: set[str]
    table: dict[str, float]
    maybe: int | None
    address: Address
    invoice: Invoice


def everything() -> Everything:
    return Everything(
        s="é ü \U0001F600", i=2**53 + 1, f=0.1, b=True, none=None, raw=b"\x00\xff bytes",
        when=dt.datetime(2026, 11, 23, 12, 30, 1, 500, tzinfo=dt.UTC), day=dt.date(2026, 2, 28),
        at=dt.time(23, 59, 58), span=dt.timedelta(seconds=90.5), ident=uuid.uuid4(),
        money=Decimal("12.34"), color=Color.BLUE, mode="slow", items=[3, 2, 1],
        pair=("a", 1), tags={"x", "y"}, table={"pi": 3.14}, maybe=None,
        address=Address("Main St", 5),
        invoice=Invoice(number=7, amount=Decimal("9.99"), lines=["a", "b"]))


def make_mux(queue: str, seen: list[Any]) -> tuple[ServeMux, Any, Any, Any]:
    mux = ServeMux()

    @mux.task("typed:everything", queue=queue)
    async def echo_everything(
        s: str, i: int, f: float, b: bool, none: None, raw: bytes, when: dt.datetime,
        day: dt.date, at: dt.time, span: dt.timedelta, ident: uuid.UUID, money: Decimal,
        color: Color, mode: Literal["fast", "slow"], items: list[int], pair: tuple[str, int],
        tags: set[str], table: dict[str, float], maybe: int | None, address: Address,
        invoice: Invoice,
    ) -> Everything:
        value = Everything(s, i, f, b, none, raw, when, day, at, span, ident, money, color,
                           mode, items, pair, tags, table, maybe, address, invoice)
        seen.append(value)
        return value

    @mux.task("typed:send", queue=queue, max_retry=5)
    async def send_email(to: str, subject: str, *, urgent: bool = False) -> Receipt:
        seen.append((to, subject, urgent))
        return Receipt(to, dt.datetime(2026, 1, 2, tzinfo=dt.UTC), [uuid.UUID(int=7)])

    @mux.task("typed:whoami", queue=queue)
    async def whoami(task: Task, greeting: str = "hi") -> str:
        seen.append(task)
        return f"{greeting} {task.id} try {task.retried}"

    return mux, echo_everything, send_email, whoami


async def test_every_supported_type_reaches_the_handler_and_the_result_as_annotated(
    asyncq_client: Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    seen: list[Any] = []
    mux, echo_everything, _, _ = make_mux(asyncq_queue, seen)
    value = everything()
    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        info = await echo_everything.enqueue(asyncq_client, **dataclasses.asdict(value)
                                             | {"address": value.address,
                                                "invoice": value.invoice})
        result = await echo_everything.result(asyncq_client, info, timeout=10)
    assert seen == [value]
    assert result == value
    # Exact types, not merely equal values (True == 1, a str UUID != UUID).
    for field in dataclasses.fields(Everything):
        assert type(getattr(result, field.name)) is type(getattr(value, field.name)), field.name
        assert type(getattr(seen[0], field.name)) is type(getattr(value, field.name)), field.name


async def test_a_typed_task_runs_with_its_options_and_returns_a_typed_result(
    asyncq_client: Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    seen: list[Any] = []
    mux, _, send_email, _ = make_mux(asyncq_queue, seen)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        info = await send_email.enqueue(asyncq_client, "ada@example.com", "Hi")
        assert (info.queue, info.max_retry, info.type) == (asyncq_queue, 5, "typed:send")
        receipt = await send_email.result(asyncq_client, info, timeout=10)
        assert receipt == Receipt("ada@example.com", dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
                                  [uuid.UUID(int=7)])
        # By id alone: the definition knows its queue.
        kept = await send_email.options(retention=60).enqueue(asyncq_client, "ed@x.y", "Yo")
        assert (await send_email.result(asyncq_client, kept.id, timeout=10)).to == "ed@x.y"
    assert seen == [("ada@example.com", "Hi", False), ("ed@x.y", "Yo", False)]


async def test_options_change_one_enqueue_and_keep_the_arguments_checked(
    asyncq_client: Client, asyncq_queue: str, asyncq_inspector: Any,
) -> None:
    _, _, send_email, _ = make_mux(asyncq_queue, [])
    later = send_email.options(process_in=60, max_retry=1, task_id="mail-1")
    info = await later.enqueue(asyncq_client, to="b@example.com", subject="Later", urgent=True)
    assert (info.id, info.state, info.max_retry) == ("mail-1", TaskState.SCHEDULED, 1)
    stored = await asyncq_inspector.task_info(asyncq_queue, "mail-1")
    assert stored.json() == {"to": "b@example.com", "subject": "Later", "urgent": True}
    assert send_email.rules is not None and send_email.rules.max_retry == 5  # unchanged
    assert "max_retry" not in send_email.defaults  # (the registration's, not the producer's)
    with pytest.raises(TypeError, match="max_retry"):
        send_email.options(max_retry="many")


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (("a@b.c",), {}, "missing a required argument: 'subject'"),
    (("a@b.c", "s", "extra"), {}, "too many positional arguments"),
    (("a@b.c", "s"), {"cc": "x"}, "unexpected keyword argument 'cc'"),
    (("a@b.c", 42), {}, "argument 'subject': expected str, got 42"),
    (("a@b.c", "s"), {"urgent": "yes"}, "argument 'urgent': expected bool, got 'yes'"),
    ((object(), "s"), {}, "argument cannot be stored"),
])
async def test_a_call_the_function_would_refuse_raises_before_anything_is_written(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str,
) -> None:
    _, _, send_email, _ = make_mux(asyncq_queue, [])
    with pytest.raises(TypeError, match=message):
        await send_email.enqueue(asyncq_client, *args, **kwargs)
    assert await redis_client.zcard(K.queue_keys(asyncq_queue).scheduled) == 0
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == 0


async def test_another_service_enqueues_a_typed_task_by_its_type_string(
    asyncq_client: Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    seen: list[Any] = []
    mux, _, _, _ = make_mux(asyncq_queue, seen)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        result = await asyncq_client.apply(
            "typed:send", {"to": "c@example.com", "subject": "From Go"}, queue=asyncq_queue,
            timeout=10)
    assert seen == [("c@example.com", "From Go", False)]
    assert result == {"to": "c@example.com", "sent_at": "2026-01-02T00:00:00+00:00",
                      "ids": [str(uuid.UUID(int=7))], "address": None}


@pytest.mark.parametrize(("payload", "reason"), [
    ({"to": "x"}, "missing the argument 'subject'"),
    ({"to": "x", "subject": "s", "bcc": 1}, "unexpected argument 'bcc'"),
    ({"to": "x", "subject": 3}, "argument 'subject': expected str, got 3"),
    (["x", "s"], "expects a JSON object of its arguments"),
])
async def test_a_payload_that_does_not_fit_is_archived_at_once_with_the_reason(
    asyncq_client: Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
    payload: object, reason: str,
) -> None:
    seen: list[Any] = []
    mux, _, _, _ = make_mux(asyncq_queue, seen)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        with pytest.raises(TaskFailedError) as failed:
            await asyncq_client.apply("typed:send", payload, queue=asyncq_queue, timeout=10)
    assert failed.value.info.state is TaskState.ARCHIVED
    assert failed.value.info.retried == 0
    assert reason in (failed.value.info.last_error or "")
    assert seen == []


async def test_a_leading_task_parameter_receives_the_running_task(
    asyncq_client: Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    seen: list[Any] = []
    mux, _, _, whoami = make_mux(asyncq_queue, seen)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        info = await whoami.enqueue(asyncq_client, "hello")  # the Task is not an argument
        assert await whoami.result(asyncq_client, info, timeout=10) == f"hello {info.id} try 0"
    [task] = seen
    assert isinstance(task, Task) and task.id == info.id and task.json() == {"greeting": "hello"}


async def test_calling_the_function_directly_runs_it() -> None:
    seen: list[Any] = []
    _, _, send_email, whoami = make_mux("q", seen)
    receipt = await send_email("d@example.com", "Direct", urgent=True)
    assert isinstance(receipt, Receipt) and seen == [("d@example.com", "Direct", True)]
    assert (await whoami()).startswith("hi None")  # a Task of its type is passed
    assert seen[-1].type == "typed:whoami"


def test_bad_definitions_are_refused_when_registered() -> None:
    mux = ServeMux()
    with pytest.raises(TypeError, match="max_retry"):
        mux.task("t:bad-option", max_retry="many")(_plain)
    with pytest.raises(TypeError, match="cannot be resolved"):
        mux.task("t:unresolvable")(_unresolvable)
    mux.task("t:once")(_plain)
    with pytest.raises(ValueError, match="already registered"):
        mux.task("t:once")(_plain)
    with pytest.raises(TypeError, match="generator"):
        mux.task("t:gen")(_gen)


async def _plain(x: int) -> int:
    return x


async def _unresolvable(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
    pass


def _gen(x: int) -> Any:
    yield x


async def test_a_sync_typed_task_runs_in_a_thread_with_the_mux_lifespan_state(
    asyncq_client: Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    import contextlib
    import threading
    from collections.abc import AsyncIterator

    @contextlib.asynccontextmanager
    async def mux_state() -> AsyncIterator[str]:
        yield "from the mux"

    @contextlib.asynccontextmanager
    async def worker_state() -> AsyncIterator[str]:
        yield "from the worker"

    mux = ServeMux(lifespan=mux_state)
    loop_thread = threading.get_ident()

    @mux.task("typed:sync", queue=asyncq_queue)
    def add(task: Task, a: int, b: int = 1) -> dict[str, Any]:
        return {"sum": a + b, "state": task.state,
                "in_a_thread": threading.get_ident() != loop_thread}

    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        info = await add.enqueue(asyncq_client, 2, b=3)
        assert await add.result(asyncq_client, info, timeout=10) == {
            "sum": 5, "state": "from the mux", "in_a_thread": True}
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, lifespan=worker_state):
        info = await add.enqueue(asyncq_client, 1)
        assert (await add.result(asyncq_client, info, timeout=10))["state"] == "from the worker"
    assert add(4) == {"sum": 5, "state": None, "in_a_thread": False}  # a Task is passed

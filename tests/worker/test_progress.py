"""Progress reports from real handlers in a real worker, on a real Redis: a listener (a plain
client coroutine, a waiting web request) sees them in order and then the result; a chatty
handler's reports are coalesced to a bounded number of writes, the last one always written
before the outcome; the inspector shows the report while the task runs and after; a write
whose lease was lost is refused; sync handlers (threads) and handler processes report too."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

import asyncq
from asyncq import (
    Client,
    EventsLost,
    Inspector,
    LeaseExpiredError,
    ServeMux,
    Task,
    TaskEvent,
    Worker,
    WorkerConfig,
)
from asyncq import TaskState as S
from asyncq._broker import Outcome
from asyncq._worker._progress import FINAL_WRITE_TIMEOUT, PROGRESS_INTERVAL
from asyncq.metrics import WorkerMetrics
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import task_hash
from tests.helpers.faults import FaultyBroker
from tests.worker import progress_handlers as ph

pytestmark = pytest.mark.anyio


async def events_of(events: Any, task_id: str, timeout: float = 10.0) -> list[TaskEvent]:
    """The events of ``task_id`` up to its final one."""
    got: list[TaskEvent] = []
    async with asyncio.timeout(timeout):
        async for event in events:
            assert isinstance(event, TaskEvent), event
            if event.id == task_id:
                got.append(event)
                if event.final:
                    return got
    raise AssertionError("stream ended")


async def test_a_listening_client_sees_each_report_in_order_then_the_result(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    heard = [asyncio.Event() for _ in range(4)]
    mux = ServeMux()

    @mux.handler("report:build")
    async def build(task: Task) -> dict[str, int]:
        for i in range(4):
            await task.set_progress((i + 1) / 4, f"part {i + 1} of 4", data={"part": i + 1})
            await heard[i].wait()  # (lockstep: the test heard this report)
        return {"parts": 4}

    task_id = uuid.uuid4().hex
    got: list[TaskEvent] = []
    async with asyncq_worker(mux, queues={q: 1}), \
            asyncq_client.events(q, task_ids=[task_id]) as events:
        await asyncq_client.enqueue("report:build", queue=q, task_id=task_id)
        async with asyncio.timeout(10):
            async for event in events:
                assert isinstance(event, TaskEvent)
                got.append(event)
                if event.progress is not None:
                    heard[round(event.progress * 4) - 1].set()
                if event.final:
                    break
    reports = [e for e in got if e.progress is not None]
    assert [(e.progress, e.progress_message, e.progress_data) for e in reports] == [
        (0.25, "part 1 of 4", {"part": 1}), (0.5, "part 2 of 4", {"part": 2}),
        (0.75, "part 3 of 4", {"part": 3}), (1.0, "part 4 of 4", {"part": 4})]
    assert all((e.previous, e.state) == (S.ACTIVE, S.ACTIVE) for e in reports)
    assert (got[-1].state, got[-1].result_json()) == (S.COMPLETED, {"parts": 4})
    assert got.index(reports[-1]) == len(got) - 2  # the last report came before the result


def web_app(client: Client, queue: str) -> Starlette:
    """A web app whose request starts a report and streams its progress, then its result:
    one line per event, as a browser's fetch would read them."""

    async def start_report(request: Request) -> StreamingResponse:
        task_id = uuid.uuid4().hex

        async def lines() -> Any:
            async with client.events(queue, task_ids=[task_id]) as events:  # listen first
                await client.enqueue("report:build", {"pages": 5}, queue=queue,
                                     task_id=task_id)
                async for event in events:
                    if isinstance(event, EventsLost):
                        yield b"lost\n"  # (re-read with Inspector.task_info then)
                    elif event.progress is not None:
                        yield orjson.dumps({"progress": event.progress,
                                            "message": event.progress_message}) + b"\n"
                    elif event.final:
                        yield orjson.dumps({"state": event.state.value,
                                            "result": event.result_json()}) + b"\n"
                        return

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    return Starlette(routes=[Route("/reports", start_report, methods=["POST"])])


async def test_a_waiting_web_request_sees_progress_in_order_then_the_result(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    mux = ServeMux()

    @mux.handler("report:build")
    async def build(task: Task) -> dict[str, int]:
        pages = task.json()["pages"]
        for page in range(1, pages + 1):
            await asyncio.sleep(PROGRESS_INTERVAL * 1.5)  # (rendering a page)
            await task.set_progress(page / pages, f"page {page} of {pages}")
        return {"pages": pages}

    transport = httpx.ASGITransport(app=web_app(asyncq_client, q))
    async with asyncq_worker(mux, queues={q: 1}), \
            httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        response = await http.post("/reports", timeout=20)
    assert response.status_code == 200
    docs = [orjson.loads(line) for line in response.text.splitlines()]
    assert docs[-1] == {"state": "completed", "result": {"pages": 5}}
    progress = [d["progress"] for d in docs[:-1]]
    # Each page's report is at least the coalescing interval after the previous one: all are
    # written, in order (a loaded machine may merge two: then fewer, still in order).
    assert progress == sorted(set(progress)) and progress[-1] == 1.0 and len(progress) >= 3
    assert set(progress) <= {p / 5 for p in range(1, 6)}
    assert docs[-2] == {"progress": 1.0, "message": "page 5 of 5"}


async def test_a_chatty_handler_is_coalesced_and_its_last_report_written_first(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    q = asyncq_queue
    calls = 20_000
    took: list[float] = []
    mux = ServeMux()

    @mux.handler("chatty", retention=60)
    async def chatty(task: Task) -> int:
        began = time.monotonic()
        for i in range(calls):
            await task.set_progress((i + 1) / calls, f"item {i + 1}")
            if i % 200 == 0:
                await asyncio.sleep(0.01)  # (some I/O between items)
        took.append(time.monotonic() - began)
        return calls

    registry = CollectorRegistry()
    async with asyncq_worker(mux, queues={q: 1}, metrics=WorkerMetrics(registry)) as w, \
            asyncq_client.events(q) as events:
        info = await asyncq_client.enqueue("chatty", queue=q)
        got = await events_of(events, info.id, timeout=30)
        writes = w.worker.processor.progress.writes
        assert w.worker.processor.progress.runs == {}  # (nothing kept once it ended)
    reports = [e for e in got if e.progress is not None]
    # At most one write per interval (plus the first and the last), however many calls.
    assert took[0] >= 0.5
    bound = took[0] / PROGRESS_INTERVAL + 2
    assert 2 <= len(reports) == writes <= bound, (len(reports), writes, bound)
    assert registry.get_sample_value("asyncq_worker_progress_writes_total",
                                     {"queue": q, "result": "stored"}) == writes
    values = [e.progress for e in reports]
    assert values == sorted(values)  # latest wins, in order
    assert (reports[-1].progress, reports[-1].progress_message) == (1.0, f"item {calls}")
    assert got[-1].state is S.COMPLETED and got[-2] is reports[-1]
    async with Inspector(asyncq_client.broker) as inspector:
        final = await inspector.task_info(q, info.id)
    assert (final.progress, final.progress_message) == (1.0, f"item {calls}")  # frozen


async def test_a_task_that_never_reports_writes_nothing(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    q = asyncq_queue
    mux = ServeMux()

    @mux.handler("quiet", retention=60)
    async def quiet(task: Task) -> str:
        return "done"

    async with asyncq_worker(mux, queues={q: 1}) as w:
        infos = [await asyncq_client.enqueue("quiet", queue=q) for _ in range(5)]
        for info in infos:
            assert await asyncq_client.result(info, timeout=30) == "done"
        assert w.worker.processor.progress.writes == 0
    for info in infos:
        assert "progress" not in await task_hash(redis_client, q, info.id)


async def test_inspect_shows_the_report_while_the_task_runs_and_after(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    release = asyncio.Event()
    mux = ServeMux()

    @mux.task("invoice:render", retention=60)
    async def render(task: Task, pages: int) -> int:  # a typed task: the leading Task
        await task.set_progress(0.5, f"page {pages // 2} of {pages}", data={"pages": pages})
        await release.wait()
        return pages

    async with asyncq_worker(mux, queues={q: 1}), Inspector(asyncq_client.broker) as insp:
        info = await render.options(queue=q).enqueue(asyncq_client, 8)

        async def reported() -> asyncq.TaskInfo | None:
            t = await insp.task_info(q, info.id)
            return t if t.progress is not None else None

        running = await wait_until(reported, message="the report is stored")
        assert running.state is S.ACTIVE
        assert (running.progress, running.progress_message, running.progress_data) == (
            0.5, "page 4 of 8", {"pages": 8})
        assert running.progress_at is not None and running.started_at is not None
        [active] = await insp.list_tasks(q, "active")
        assert active.progress == 0.5
        release.set()
        assert await asyncq_client.result(info, timeout=30) == 8
        done = await insp.task_info(q, info.id)
    assert done.state is S.COMPLETED
    assert (done.progress, done.progress_message) == (0.5, "page 4 of 8")  # as it ended


async def test_a_write_whose_lease_was_lost_is_refused(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    reported, taken_over, refused = asyncio.Event(), asyncio.Event(), asyncio.Event()
    raised: list[BaseException] = []
    mux = ServeMux()

    @mux.handler("long")
    async def long(task: Task) -> None:
        await task.set_progress(0.3, "mine")
        reported.set()
        await taken_over.wait()
        await task.set_progress(0.6, "after the takeover")  # written, and refused
        await refused.wait()
        try:
            await task.set_progress(0.7)
        except LeaseExpiredError as exc:
            raised.append(exc)  # (then it returns: its outcome is refused, as it must be)

    # (heartbeats far apart: the worker does not learn of the loss before the handler does)
    async with asyncq_worker(mux, queues={q: 1}, lease_duration=60,
                             heartbeat_interval=30) as w, \
            Inspector(asyncq_client.broker) as insp:
        info = await asyncq_client.enqueue("long", queue=q, max_retry=3)
        await asyncio.wait_for(reported.wait(), 10)
        # (the first write stored, not only sent: a takeover before it would refuse it too)
        await wait_until(lambda: w.worker.processor.progress.writes == 1
                         and not w.worker.processor.progress.runs[info.id].inflight)
        # The lease lapsed (as if the worker had been partitioned) and the recoverer retried
        # the task: the run still going here no longer owns it.
        now = int(time.time() * 1000)
        assert await asyncq_client.broker.maintenance.recover(
            Outcome("retry", q, info.id, retry_at_ms=now + 60_000, error="lease expired"),
            now + 600_000)
        writes = w.worker.processor.progress.writes
        taken_over.set()
        progress = w.worker.processor.progress
        await wait_until(lambda: progress.writes == writes + 1
                         and info.id in progress.runs and progress.runs[info.id].lost)
        refused.set()
        await wait_until(lambda: raised, message="the next report raised")
        stored = await insp.task_info(q, info.id)
    assert isinstance(raised[0], LeaseExpiredError)
    assert "no longer leased to this worker" in str(raised[0])
    assert stored.state is S.RETRY
    assert (stored.progress, stored.progress_message) == (0.3, "mine")  # not the refused one


async def test_a_sync_handler_reports_from_its_thread(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    mux = ServeMux()

    @mux.handler("export", retention=60)
    def export(task: Task) -> int:  # a plain def: runs in a worker thread
        rows = 50_000
        for i in range(rows):
            task.set_progress_sync((i + 1) / rows, f"row {i + 1}")
            if i % 5_000 == 0:
                time.sleep(0.02)  # (blocking I/O)
        return rows

    async with asyncq_worker(mux, queues={q: 1}) as w, asyncq_client.events(q) as events:
        info = await asyncq_client.enqueue("export", queue=q)
        got = await events_of(events, info.id, timeout=30)
        writes = w.worker.processor.progress.writes
    reports = [e.progress for e in got if e.progress is not None]
    assert reports == sorted(reports) and reports[-1] == 1.0
    assert 1 <= len(reports) == writes < 50  # coalesced: a few writes for 50 000 calls
    assert got[-1].state is S.COMPLETED and got[-2].progress_message == "row 50000"
    async with Inspector(asyncq_client.broker) as insp:
        assert (await insp.task_info(q, info.id)).progress == 1.0


async def test_the_last_report_made_wins_over_an_earlier_one_from_a_thread(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """A real thread reports first (``set_progress_sync``); the handler then reports on the
    loop before the loop has taken the thread's report in: the later, loop's report is the one
    stored and the last one heard."""
    q = asyncq_queue
    mux = ServeMux()

    @mux.handler("mixed", retention=60)
    async def mixed(task: Task) -> None:
        posted = threading.Event()

        def work() -> None:
            task.set_progress_sync(0.3, "from the thread")
            posted.set()

        thread = threading.Thread(target=work)
        thread.start()
        posted.wait(10)  # (blocks the loop: the thread's report is not taken in yet)
        thread.join(10)
        await task.set_progress(0.9, "from the loop")  # made later

    async with asyncq_worker(mux, queues={q: 1}), asyncq_client.events(q) as events:
        info = await asyncq_client.enqueue("mixed", queue=q)
        got = await events_of(events, info.id, timeout=30)
    heard = [(e.progress, e.progress_message) for e in got if e.progress is not None]
    assert heard[-1] == (0.9, "from the loop"), heard
    async with Inspector(asyncq_client.broker) as insp:
        stored = await insp.task_info(q, info.id)
    assert (stored.progress, stored.progress_message) == (0.9, "from the loop")


async def test_a_message_with_a_lone_surrogate_is_refused_where_it_is_made(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """The handler hears ValueError at its call (it was accepted, then dropped by the worker
    with a traceback); its next, valid report is stored."""
    q = asyncq_queue
    mux = ServeMux()

    @mux.handler("names", retention=60)
    async def names(task: Task) -> str:
        try:
            await task.set_progress(0.5, "file \ud800.csv")
        except ValueError as exc:
            await task.set_progress(0.6, "file ?.csv")
            return str(exc)
        return "accepted"

    async with asyncq_worker(mux, queues={q: 1}) as w:
        info = await asyncq_client.enqueue("names", queue=q)
        done = await asyncq_client.wait(info, timeout=30)
        writes = w.worker.processor.progress.writes
    assert "lone surrogate" in done.result_json()
    assert writes == 1
    assert (done.progress, done.progress_message) == (0.6, "file ?.csv")


async def test_a_handler_process_reports_over_its_pipe(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    mux = ServeMux()
    mux.handle("crunch", ph.crunch, isolate="process", retention=60)
    mux.handle("bad-report", ph.bad_report, isolate="process", max_retry=0)
    async with asyncq_worker(mux, queues={q: 1}, process_pool_size=1) as w, \
            asyncq_client.events(q) as events:
        info = await asyncq_client.enqueue("crunch", {"steps": 10_000}, queue=q)
        got = await events_of(events, info.id, timeout=30)
        bad = await asyncq_client.enqueue("bad-report", queue=q)
        failed = await asyncq_client.wait(bad, timeout=30)
        writes = w.worker.processor.progress.writes
    reports = [e for e in got if e.progress is not None]
    assert [e.progress for e in reports] == sorted(e.progress for e in reports)
    assert (reports[-1].progress, reports[-1].progress_message, reports[-1].progress_data) == (
        1.0, "crunched", {"steps": 10_000})
    assert got[-1].state is S.COMPLETED and got[-1].result_json() == 10_000
    assert got[-2] is reports[-1] and len(reports) == writes <= 10
    assert failed.state is S.ARCHIVED and failed.last_error is not None
    assert "progress must be a fraction from 0.0 to 1.0, got 42" in failed.last_error
    async with Inspector(asyncq_client.broker) as insp:
        assert (await insp.task_info(q, info.id)).progress_message == "crunched"


async def test_a_failed_write_never_fails_the_task(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
) -> None:
    """Redis refusing or not answering progress writes: the handler goes on, its outcome is
    written (after at most FINAL_WRITE_TIMEOUT when the last write hangs)."""
    q = asyncq_queue
    broker = FaultyBroker(redis_client)
    mux = ServeMux()

    @mux.handler("report:build", retention=60)
    async def build(task: Task) -> str:
        for i in range(1, 4):
            await task.set_progress(i / 3)
            await asyncio.sleep(PROGRESS_INTERVAL)
        return "built"

    outage = broker.fault("set_progress")  # each write fails: Redis said no
    async with Worker(broker=broker, handler=mux, config=WorkerConfig(queues={q: 1})):
        info = await asyncq_client.enqueue("report:build", queue=q)
        assert await asyncq_client.result(info, timeout=30) == "built"
        assert outage.fired >= 2
        outage.active = False
        broker.fault("set_progress", when="hang")  # the last write never answers
        began = time.monotonic()
        info = await asyncq_client.enqueue("report:build", queue=q)
        assert await asyncq_client.result(info, timeout=40) == "built"
        waited = time.monotonic() - began
    # (the hung write alone would never end: its timeout did)
    assert FINAL_WRITE_TIMEOUT <= waited < FINAL_WRITE_TIMEOUT + 30
    async with Inspector(asyncq_client.broker) as insp:
        assert (await insp.task_info(q, info.id)).progress is None  # nothing was written

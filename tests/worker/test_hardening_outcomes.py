"""Outcomes a handler cannot spoil (issue 12 B): error text with a lone surrogate is stored
escaped, and an outcome Redis refuses for good is replaced by a recorded failure without
holding up the outcomes written with it."""

from __future__ import annotations

from redis.asyncio import Redis

from asyncq import Client, Inspector, ServeMux, Task
from asyncq._broker import Outcome
from asyncq._broker._connection import make_broker
from asyncq._worker._acker import Acker
from asyncq._worker._leases import OUTCOME, Leases
from asyncq.testing import WorkerFactory, wait_until

OWNER = "srv-hardening"


async def test_an_error_message_with_a_lone_surrogate_is_stored_escaped(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str,
) -> None:
    mux = ServeMux()

    @mux.handler("parse")
    async def parse(task: Task) -> str:
        name = task.json()
        if name == "bad":
            raise ValueError("cannot parse " + b"caf\xff".decode("utf-8", "surrogateescape"))
        return name

    infos = [await asyncq_client.enqueue("parse", name, queue=asyncq_queue, max_retry=0,
                                         retention=60)
             for name in ("a", "bad", "b", "c")]
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained(asyncq_queue, timeout=10)
        assert w.worker.acker.unstorable == 0
    async with Inspector(asyncq_redis_url) as inspector:
        states = [await inspector.task_info(asyncq_queue, i.id) for i in infos]
    assert [s.state.value for s in states] == ["completed", "archived", "completed", "completed"]
    assert states[1].last_error == "ValueError: cannot parse caf\\udcff"


async def test_an_outcome_redis_refuses_is_replaced_and_the_others_are_written(
    redis_client: Redis, asyncq_queue: str, asyncq_redis_url: str,
) -> None:
    broker = make_broker(redis_client)
    client = Client(broker)
    ids = [(await client.enqueue("t", i, queue=asyncq_queue)).id for i in range(6)]
    raws, _ = await broker.dequeue(asyncq_queue, 6, OWNER, 60_000, 1000, "req")
    assert [r.id for r in raws] == ids
    leases = Leases()
    acker = Acker(broker, OWNER, leases)
    poisoned = {ids[1], ids[4]}
    for task_id in ids:
        leases.add(task_id, asyncq_queue, 2**62, OUTCOME)
        error = "Boom: \udcff" if task_id in poisoned else "Boom: fine"
        kind = "retry" if task_id == ids[4] else "archive"
        acker.submit(Outcome(kind, asyncq_queue, task_id, retry_at_ms=1, error=error))
    assert await acker.flush()
    assert not acker.pending and not list(leases.by_queue())
    assert (acker.written, acker.unstorable) == (6, 2)
    async with Inspector(asyncq_redis_url) as inspector:
        infos = {i: await inspector.task_info(asyncq_queue, i) for i in ids}
    for task_id, info in infos.items():
        if task_id in poisoned:
            assert info.last_error.startswith("outcome could not be stored: UnicodeEncodeError")
            assert info.state.value == ("retry" if task_id == ids[4] else "archived")
        else:
            assert (info.state.value, info.last_error) == ("archived", "Boom: fine")


async def test_a_retry_due_at_once_and_leased_again_while_its_outcome_is_written_runs(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """A failed run's retry (due at once) can be forwarded and leased to the same worker
    before that worker has read the reply to its outcome write: the new run starts (it was
    left leased and idle until its lease ran out)."""
    mux = ServeMux()
    runs: list[int] = []

    @mux.handler("flaky")
    async def flaky(task: Task) -> None:
        runs.append(task.retried)
        if task.retried == 0:
            raise RuntimeError("first run fails")

    worker = asyncq_worker.build(mux, queues={asyncq_queue: 1}, retry_delay=lambda n, e, t: 0)
    processor, acker, broker = worker.processor, worker.acker, worker.broker
    await asyncq_client.enqueue("flaky", queue=asyncq_queue)
    await processor.tick(10)
    await wait_until(lambda: bool(acker.pending), timeout=10, message="the first run ended")
    [waiting] = acker.pending.values()
    assert waiting.outcome.kind == "retry"
    # Redis applies the outcome (as a write whose reply is not read yet), the retry is
    # forwarded, and this worker's next dequeue leases the task again.
    assert await broker.finish([waiting.outcome], processor._owner) == [True]
    assert (await broker.maintenance.forward(asyncq_queue, "retry", 10))[0] == 1
    await processor.tick(10)
    await wait_until(lambda: runs == [0, 1], timeout=10, message="the retry ran")
    assert await acker.flush()  # the earlier run's outcome is not written over the new run
    assert acker.given_up == 1 and not acker.pending

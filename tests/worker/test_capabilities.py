"""What a broker lacks, it declares (``Broker.capabilities``) and the worker checks: over Go
asynq's layout a worker runs no workflow advancer and drops progress reports with one warning,
and the layout's ``workflows`` refuses with the reason instead of pretending."""

from __future__ import annotations

import pytest
import structlog.testing

from asyncq import BrokerError, Client, ServeMux, Task
from asyncq._broker import Capability
from asyncq._workflow._advance import Advancer
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio


def reporting_mux(done: list[str]) -> ServeMux:
    mux = ServeMux()

    @mux.handler("report:build")
    async def build(task: Task) -> None:
        for i in range(3):
            await task.set_progress((i + 1) / 3, f"part {i + 1}")
        done.append(task.id or "")

    return mux


@pytest.mark.parametrize("wire", ["asyncq", "asynq"])
async def test_a_worker_uses_only_what_its_broker_offers(
        wire: str, asyncq_redis_url: str, asyncq_queue: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = asyncq_redis_url + ("?wire=asynq" if wire == "asynq" else "")
    rounds: list[int] = []
    real_tick = Advancer.tick

    async def counted(self: Advancer) -> int:
        rounds.append(1)
        return await real_tick(self)

    monkeypatch.setattr(Advancer, "tick", counted)
    done: list[str] = []
    factory = WorkerFactory(url)
    try:
        with structlog.testing.capture_logs() as logs:
            async with factory(reporting_mux(done), queues={asyncq_queue: 1},
                               workflow_interval=0.05) as running, Client(url) as client:
                broker = running.worker.broker
                for _ in range(2):
                    await client.enqueue("report:build", queue=asyncq_queue)
                await wait_until(lambda: len(done) == 2)
                if wire == "asyncq":
                    await wait_until(lambda: len(rounds) >= 2)  # (it polls every 50 ms)
    finally:
        await factory.aclose()
    unstored = [e for e in logs if "not stored by this broker" in e.get("event", "")]
    if wire == "asyncq":
        assert broker.capabilities == frozenset(Capability)
        assert unstored == []
    else:
        assert Capability.WORKFLOWS not in broker.capabilities
        assert Capability.PROGRESS not in broker.capabilities
        assert Capability.EXPIRY not in broker.capabilities
        assert rounds == []  # no advancer polling for workflows that cannot exist
        assert len(unstored) == 1  # said once, for 6 reports of 2 tasks
        assert unstored[0]["log_level"] == "warning"


async def test_go_layout_refuses_workflows_with_the_reason(asyncq_redis_url: str) -> None:
    async with Client(asyncq_redis_url + "?wire=asynq") as client:
        broker = client.broker
        assert Capability.WORKFLOWS not in broker.capabilities
        with pytest.raises(BrokerError, match="not available with wire=asynq") as caught:
            broker.workflows  # noqa: B018
        assert caught.value.refused

"""What a broker does not offer it refuses, saying why: ``broker.workflows`` without
``Capability.WORKFLOWS`` (``set_progress`` without ``Capability.PROGRESS``:
test_conf_progress.py)."""

from __future__ import annotations

import pytest
from conformance_helpers import lacks

from asyncq._broker import Broker, Capability
from asyncq._errors import BrokerError

pytestmark = pytest.mark.anyio

ON_CLUSTER = True


async def test_workflows_say_why_they_are_not_available(broker: Broker,
                                                       asyncq_queue: str) -> None:
    lacks(broker, Capability.WORKFLOWS)
    assert Capability.WORKFLOWS not in broker.capabilities  # (so no worker polls them)
    with pytest.raises(BrokerError, match="workflows are not available with wire=asynq") as caught:
        await broker.workflows.create("wf", b"{}", [], 0)
    assert caught.value.refused

"""What wire=asynq does not offer yet: each such operation raises a BrokerError (refused)
naming itself, so a caller sees at once why, and a worker's background loop logs it and goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NoReturn

import anyio

from ..._errors import BrokerError


def unavailable(what: str) -> BrokerError:
    return BrokerError(f"{what} is not yet available with wire=asynq (Go asynq's layout)",
                       refused=True)


class UnavailableOps:
    """An operation group (``inspect``, ``schedules``, ``limits``) none of whose operations is
    available yet: calling any raises ``unavailable``."""

    batch_size = 100

    def __init__(self, group: str) -> None:
        self._group = group

    def __getattr__(self, name: str) -> Callable[..., NoReturn]:
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> NoReturn:
            raise unavailable(f"{self._group}.{name}")

        return call


class AsynqWorkflowOps(UnavailableOps):
    """Workflows are not available with wire=asynq; what a worker's advancer polls answers
    "nothing to do" (no workflow step is ever stored, so no outbox ever fills), so it stays
    quiet instead of failing every interval."""

    def __init__(self) -> None:
        super().__init__("workflows")

    def __getattr__(self, name: str) -> Callable[..., NoReturn]:
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> NoReturn:
            raise BrokerError(
                f"workflows.{name}: workflows are not available with wire=asynq (a workflow's "
                "state and its steps change together in keys Go asynq has no notion of, and a "
                "Go server finishing a step would never advance it); run workflows on a queue "
                "of asyncq's own layout", refused=True)

        return call

    async def take(self, queue: str, owner: str, lock_ms: int, limit: int,
                   idle_ms: int) -> list[Any]:
        return []

    async def outbox_size(self, queue: str) -> int:
        return 0

    async def listen_outboxes(self, queues: Sequence[str]) -> AsyncIterator[None]:
        await anyio.sleep_forever()
        yield None  # (never reached: makes this an async generator)

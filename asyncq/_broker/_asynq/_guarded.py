"""asyncq's own-layout broker with the layout check of ``_layout``: a queue that only Go
asynq's ``asynq:queues`` knows is refused before anything is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._validate import check_own_layout_queue
from .._redis import RedisBroker
from .._values import EnqueueCode, NewTask, RawTask
from ._layout import LayoutGuard


class GuardedRedisBroker(RedisBroker):
    """RedisBroker checking each queue's layout the first time it registers, stores into or
    dequeues from it (one extra round trip per queue and broker)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.layout = LayoutGuard(self.runner, "asyncq")
        self._layout = self.layout  # (checked by RedisBroker.store itself)

    #: ValueError for a queue name this layout refuses (a worker checks its queues at start).
    check_queue_name = staticmethod(check_own_layout_queue)

    @staticmethod
    def accepts_queue(queue: str) -> bool:
        """Whether this layout takes ``queue`` (a worker's pattern serves no other name)."""
        try:
            check_own_layout_queue(queue)
        except ValueError:
            return False
        return True

    async def register_queues(self, queues: Sequence[str]) -> None:
        await self.layout.check(queues)
        await super().register_queues(queues)

    async def store_many(self, tasks: Sequence[NewTask]) -> list[EnqueueCode | Exception]:
        await self.layout.check([t.msg.queue for t in tasks])
        return await super().store_many(tasks)

    async def dequeue(
        self, queue: str, count: int, owner: str, lease_ms: int, waiter_ttl_ms: int,
        request_id: str = "", one_hop: bool = False,
    ) -> tuple[list[RawTask], int]:
        if queue not in self.layout.checked:
            await self.layout.check((queue,))
        return await super().dequeue(queue, count, owner, lease_ms, waiter_ttl_ms, request_id,
                                     one_hop)

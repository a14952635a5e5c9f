"""Loud layout mismatches: a queue registered only in the other layout's queue set is refused
before anything is written (issue 29, item 7).

asyncq's own layout registers queues in ``asyncq:queues``, Go asynq's in ``asynq:queues``. A
broker of one layout checks each queue the first time it touches it (registering, storing,
dequeuing): a queue only the other set knows holds data this broker cannot read, and the
error names the URL option that selects the right layout. A queue in neither (new) or in both
passes. Imports no protobuf: asyncq's default broker uses it too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Literal

from redis.asyncio import RedisCluster
from redis.exceptions import NoPermissionError

from ..._errors import BrokerError
from ..._validate import check_own_layout_queue
from .._runner import ScriptRunner
from ._keys import ASYNCQ_QUEUES, QUEUES

Wire = Literal["asyncq", "asynq"]
WIRES: tuple[Wire, ...] = ("asyncq", "asynq")


def mismatch_error(queue: str, wire: Wire) -> BrokerError:
    """The error for a ``wire`` broker meeting ``queue`` of the other layout."""
    if wire == "asynq":
        why = (f"queue {queue!r} holds asyncq's own layout (it is in {ASYNCQ_QUEUES}, not in "
               f"{QUEUES}), but this connection speaks Go asynq's (?wire=asynq): drop "
               f"?wire=asynq from the Redis URL (wire='asyncq') to use it")
    else:
        why = (f"queue {queue!r} holds Go asynq's layout (it is in {QUEUES}, not in "
               f"{ASYNCQ_QUEUES}): add ?wire=asynq to the Redis URL (or pass wire='asynq') to "
               f"work with Go asynq's queues")
    return BrokerError(why + "; nothing was written", refused=True)


def check_cluster_queue(queue: str) -> None:
    """ValueError for a queue of Go's layout no script can run on Redis Cluster: its name
    starts with ``}``, so its keys (``asynq:{}x}:...``) have an empty hash tag and land in
    different slots (Go's scripts fail on it as well)."""
    if queue.startswith("}"):
        raise ValueError(
            f"queue name {queue!r} starts with '}}': on Redis Cluster its keys "
            f"(asynq:{{{queue}}}:...) would have an empty hash tag and land in different "
            f"slots, so no script could run on it (Go asynq's neither); use another name, or "
            f"a single Redis node; nothing was written")


class LayoutGuard:
    """Checks each queue once per broker (a queue found fine is not read again). Callers that
    meet a queue while its check is under way wait for that check instead of sending their
    own: a burst of enqueues into a new queue makes one round trip, not one each."""

    def __init__(self, runner: ScriptRunner, wire: Wire) -> None:
        self._runner = runner
        self._wire = wire
        self._cluster = isinstance(runner.redis, RedisCluster)
        self._mine, self._other = (QUEUES, ASYNCQ_QUEUES) if wire == "asynq" else (
            ASYNCQ_QUEUES, QUEUES)
        self.checked: set[str] = set()
        """The queues found fine (read only: a caller may skip ``check`` for them)."""
        self._pending: dict[str, asyncio.Future[None]] = {}

    def forget(self, queue: str) -> None:
        """Check ``queue`` again at its next use (it was removed)."""
        self.checked.discard(queue)

    async def check(self, queues: Sequence[str]) -> None:
        """Raise BrokerError (refused) if one of ``queues`` belongs to the other layout;
        ValueError, before anything is read, for a name asyncq's own layout refuses
        (``check_own_layout_queue``: braces, whitespace, ``*``) when this is that layout."""
        checked = self.checked
        if len(queues) == 1 and queues[0] in checked:
            return
        new = [q for q in dict.fromkeys(queues) if q not in checked]
        if not new:
            return
        if self._wire == "asyncq":
            for queue in new:
                check_own_layout_queue(queue)
        elif self._cluster:
            for queue in new:
                check_cluster_queue(queue)
        waits = {id(f): f for q in new if (f := self._pending.get(q)) is not None}
        mine = [q for q in new if q not in self._pending]
        if mine:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for queue in mine:
                self._pending[queue] = done
            try:
                await self._read(mine)
            finally:
                for queue in mine:
                    del self._pending[queue]
                done.set_result(None)  # its waiters see the outcome in ``checked``
        if waits:
            await asyncio.gather(*(asyncio.shield(f) for f in waits.values()))
            # A check that failed (Redis, a mismatch, a cancel) left its queues unchecked:
            # checked again here, so this caller gets its own error.
            await self.check([q for q in new if q not in checked])

    async def _read(self, new: list[str]) -> None:
        try:
            replies = await self._runner.commands("checking the queues' layout", [
                command for q in new
                for command in (("SISMEMBER", self._mine, q), ("SISMEMBER", self._other, q))])
        except BrokerError as exc:
            if not isinstance(exc.__cause__, NoPermissionError):
                raise
            # An ACL user kept to its own layout's keys cannot read the other's registry, and
            # so cannot have written that layout's queues either: nothing to refuse.
            self.checked.update(new)
            return
        for i, queue in enumerate(new):
            if replies[2 * i + 1] and not replies[2 * i]:
                raise mismatch_error(queue, self._wire)
            self.checked.add(queue)

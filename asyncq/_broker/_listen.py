"""Listening: the pub/sub side of the broker, yielding typed, decoded messages.

Classic channels (cancel requests, wake-ups) go through one PUBLISH/SUBSCRIBE connection;
task events and one-hop hand-offs are published on shard channels (see ``_shard_listen``).
Every iterator raises BrokerError when its connection fails; its caller subscribes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Collection, Sequence, Set
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from .._errors import BrokerError
from .._log import get_logger
from .._model._events import TaskEvent, decode_event
from . import _keys as K
from ._lean_settings import LeanSettings
from ._messages import CancelRequest, Handoff, QueuesAdded, QueueWake, WorkerSignal
from ._push import subscribe
from ._redis_errors import broker_error
from ._replies import text
from ._runner import ScriptRunner
from ._shard_listen import Flush, listen_shards
from ._values import EventFlush, decode_handoff


class Listeners:
    """The broker's listeners over ``runner``. A connection that heard nothing for
    ``ping_interval`` (0: never) is pinged; no answer within ``reply_timeout`` raises
    BrokerError, so a silently dead connection (a peer that vanished without closing it, a
    paused server) is replaced instead of waited on forever."""

    def __init__(self, runner: ScriptRunner, ping_interval: float, reply_timeout: float) -> None:
        self._runner = runner
        self._idle = ping_interval or None
        self._reply_timeout = reply_timeout
        self._log = get_logger("listen")
        self._bad_events = 0
        """Undecodable task events heard (the first one is logged)."""

    async def listen(self, channels: Sequence[str]) -> AsyncIterator[tuple[str, str] | None]:
        """Subscribe; yield None once subscribed, then (channel, message) pairs until an
        error."""
        settings = self._runner.lean_settings
        if settings is not None:  # a single node: on a push link of asyncq's own
            try:
                link = await subscribe(settings, "SUBSCRIBE", channels, self._reply_timeout,
                                       self._idle)
                try:
                    yield None
                    while True:
                        item = await link.get()
                        if isinstance(item, Exception):
                            raise item
                        if item[0] == b"message":
                            yield item[1].decode(), item[2].decode()
                finally:
                    link.close()
            except RedisError as exc:
                raise broker_error(f"subscription failed: {exc}", exc) from exc
            return
        pubsub = await self._runner.pubsub()
        try:
            try:
                await pubsub.subscribe(*channels)
                confirmed = 0
                while confirmed < len(channels):
                    msg = await pubsub.get_message(timeout=self._reply_timeout)
                    if msg is None:
                        raise BrokerError("timed out waiting for the subscription",
                                          transient=True)
                    if msg["type"] == "subscribe":
                        confirmed += 1
                yield None
                while True:
                    msg = await pubsub.get_message(ignore_subscribe_messages=True,
                                                   timeout=self._idle)
                    if msg is None and self._idle is not None:
                        await pubsub.ping()
                        msg = await self._next_message(pubsub)
                        if msg is None:
                            raise BrokerError(f"no answer to a ping on the pub/sub connection "
                                              f"within {self._reply_timeout:g}s",
                                              transient=True)
                    if msg is not None and msg["type"] == "message":
                        yield text(msg["channel"]), text(msg["data"])
            except RedisError as exc:
                if isinstance(exc, RedisConnectionError):
                    self._runner.connection_broke()
                raise broker_error(f"subscription failed: {exc}", exc) from exc
        finally:
            with contextlib.suppress(RedisError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _next_message(self, pubsub: Any) -> dict[str, Any] | None:
        """The next message of any kind (a pong included) within ``reply_timeout``, or None."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._reply_timeout
        while (left := deadline - loop.time()) > 0:
            # (None also comes back when redis-py swallowed its own health-check pong.)
            msg: dict[str, Any] | None = await pubsub.get_message(timeout=left)
            if msg is not None:
                return msg
        return None

    async def signals(self, queues: Collection[str], *,
                      new_queues: bool = False) -> AsyncIterator[WorkerSignal | None]:
        """Cancel requests, wake-ups of ``queues`` (those of other queues are skipped) and,
        with ``new_queues``, announcements of new queues. A set given is read at each
        message, so its owner may add queues while listening."""
        wanted = queues if isinstance(queues, Set) else frozenset(queues)
        channels = [K.CANCEL_CHANNEL, K.WAKE_CHANNEL]
        if new_queues:
            channels.append(K.NEW_QUEUES_CHANNEL)
        async for item in self.listen(channels):
            if item is None:
                yield None
                continue
            signal = _signal(*item, wanted)
            if signal is not None:
                yield signal

    async def events(self, queues: Sequence[str]) -> AsyncIterator[TaskEvent | EventFlush]:
        """The task events of ``queues``, decoded (an undecodable one is skipped, the first
        logged), after an EventFlush once subscribed."""
        channels = {K.queue_keys(q).events: q for q in queues}
        async for item in listen_shards(self._runner, list(channels), self._reply_timeout,
                                        self._idle):
            if not isinstance(item, tuple):
                yield functools.partial(_flush_queue, item)
                continue
            queue = channels.get(item[0], item[0])
            try:
                event = decode_event(queue, item[1])
            except ValueError as exc:
                self._bad_events += 1
                if self._bad_events == 1:
                    self._log.warning("undecodable task event ignored", queue=queue,
                                      error=str(exc))
                continue
            yield event

    async def handoffs(self, queues: Sequence[str],
                       owner: str) -> AsyncIterator[Handoff | None]:
        """The tasks handed off to ``owner`` in ``queues``, decoded (a malformed message is
        logged and skipped: the owner's next dequeue returns its task)."""
        channels = {K.queue_keys(q).handoff_channel(owner): q for q in queues}
        settings = self._runner.lean_settings
        if settings is not None:  # the pickup path, read directly from a push link
            async for handoff in self._lean_handoffs(settings, channels):
                yield handoff
            return
        async for item in listen_shards(self._runner, list(channels), self._reply_timeout,
                                        self._idle):
            if not isinstance(item, tuple):
                yield None
                continue
            handoff = self._handoff(channels[item[0]], item[1])
            if handoff is not None:
                yield handoff


    def _handoff(self, queue: str, data: bytes) -> Handoff | None:
        """The hand-off a message carries; None (logged) when it is malformed."""
        try:
            task, until = decode_handoff(data)
        except (ValueError, UnicodeDecodeError) as exc:
            self._log.warning("malformed hand-off message ignored", queue=queue, error=str(exc))
            return None
        return Handoff(queue, task, until)

    async def _lean_handoffs(self, settings: LeanSettings,
                             channels: dict[str, str]) -> AsyncIterator[Handoff | None]:
        """``handoffs`` on a push link of asyncq's own (``_push``)."""
        queues = {channel.encode(): queue for channel, queue in channels.items()}
        try:
            link = await subscribe(settings, "SSUBSCRIBE", list(channels),
                                   self._reply_timeout, self._idle)
            try:
                yield None
                while True:
                    item = await link.get()
                    if isinstance(item, Exception):
                        raise item
                    if item[0] != b"smessage":
                        continue  # a pong
                    handoff = self._handoff(queues[item[1]], item[2])
                    if handoff is not None:
                        yield handoff
            finally:
                link.close()
        except RedisError as exc:
            raise broker_error(f"hand-off subscription failed: {exc}", exc) from exc


def _signal(channel: str, data: str, queues: Set[str]) -> WorkerSignal | None:
    """A message of the cancel or wake channel, decoded; None when it is not for ``queues``."""
    if channel == K.CANCEL_CHANNEL:
        return CancelRequest(data)
    if channel == K.NEW_QUEUES_CHANNEL:
        return QueuesAdded(tuple(data.split("\n")))
    if channel == K.WAKE_CHANNEL:
        if data in queues:
            return QueueWake(data)
        # "<queue>@<due ms>": a task scheduled for later became the queue's earliest.
        queue, at, due = data.rpartition("@")
        if at and queue in queues and due.isdigit():
            return QueueWake(queue, int(due))
    return None


async def _flush_queue(flush: Flush, queue: str) -> None:
    await flush(K.queue_keys(queue).events)

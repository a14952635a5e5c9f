"""The worker's limit gate: between leasing tasks and starting them.

Right after a dequeue (or a hand-off), the leased tasks claim their limits in one script call
per queue: the limits their handler declares, and a slot of the queue's concurrency cap when
the dequeue said the queue has one (a cap is set in Redis at run time; the dequeue script
reads it in the step that leases, so nothing polls for it, and a capped queue's tasks are
never handed off). A batch with neither (types without limits, no cap) makes no call. A
task that gets every slot and token starts; a refused one was deferred by that same script
(active -> scheduled, no retry used, counted neither processed nor failed) and this worker
lets it go, its slot free for other work. A task's concurrency slots are given back,
batched, once its outcome is decided; a lost give-back is covered by the lease rule.

The gate reaches limit state through the broker's ``limits`` (the ``LimitOps`` protocol), so
any Broker (a wrapping one too) carries them. The give-backs leave in one task at a time,
owned by the gate: it logs their failure, and ``settled`` (called by the processor as it
stops) waits for it, then cancels and awaits what is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from .._broker import QUEUE_SPEC, Broker, LimitClaim, LimitHold, LimitOps, LimitSpec, RawTask
from .._errors import DecodeError, LimitKeyError
from .._log import get_logger
from .._model._task import task_for_handler
from ._registry import HandlerLimits
from ._spec import Limit, RateLimit

MAX_KEY_CHARS = 500


def spec_of(limit: Limit) -> LimitSpec:
    """The broker's view of a named limit."""
    assert limit.name is not None
    if isinstance(limit, RateLimit):
        return LimitSpec("rate", limit.name, limit.n, limit.period_ms, limit.burst)
    return LimitSpec("concurrency", limit.name, limit.n)


def key_text(value: object) -> str:
    """A key function's result as the key it names: a string or an int."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TypeError(f"a limit key must be a str or an int, got {value!r}")
    key = str(value)
    if len(key) > MAX_KEY_CHARS:
        raise ValueError(f"a limit key must be at most {MAX_KEY_CHARS} characters")
    return key


class LimitGate:
    """Claims the limits of leased tasks (``admit``) and gives slots back (``release``)."""

    def __init__(self, ops: LimitOps, limits: HandlerLimits, owner: str,
                 on_deferred: Callable[[int], None], observer: Any = None) -> None:
        self._ops = ops
        self.limits = limits
        self._owner = owner
        self._on_deferred = on_deferred
        self._deferred_hook = getattr(observer, "limit_deferred", None)
        self._log = get_logger("limits", server_id=owner)
        self.holds: dict[str, tuple[str, list[tuple[LimitSpec, str]]]] = {}
        """Task id -> (queue, the (limit, key) of each concurrency slot it holds)."""
        self.deferred = 0
        """Tasks this worker deferred because a limit refused them."""
        self._releases: dict[str, list[LimitHold]] = {}
        self._flusher: asyncio.Task[None] | None = None

    async def admit(self, queue: str, raws: Sequence[RawTask]) -> tuple[list[RawTask],
                                                                        list[RawTask]]:
        """``(start, give back)``: the tasks to start (every limit taken, the queue's cap
        included), and those whose claim failed (Redis error) to requeue; refused tasks are
        in neither."""
        capped = any(raw.capped for raw in raws)
        if not capped and not self.limits:
            return list(raws), []
        claimed = [(raw, *self._claim(raw)) for raw in raws]
        if not capped and not any(claim.limits for _, claim, _ in claimed):
            return list(raws), []  # no limit on these types, no cap: nothing to claim
        try:
            results = await self._ops.acquire(queue, self._owner, [c for _, c, _ in claimed],
                                              queue_cap=capped)
        except Exception as exc:  # a BrokerError: nothing known, so nothing may start
            self._log.warning("claiming limits failed; tasks requeued", queue=queue,
                              count=len(claimed), error=str(exc))
            return [], list(raws)
        admitted: list[RawTask] = []
        for (raw, claim, task_type), result in zip(claimed, results, strict=True):
            if result in (0, 1):
                slots = [(spec, key) for spec, key in claim.limits
                         if spec.kind == "concurrency"]
                if result == 1:
                    slots.append((QUEUE_SPEC, ""))
                if slots:
                    self.holds[raw.id] = (queue, slots)
                admitted.append(raw)
            elif result > 1:
                self.deferred += 1
                self._on_deferred(result)
                if self._deferred_hook is not None:
                    self._deferred_hook(queue, task_type)
        return admitted, []

    def _claim(self, raw: RawTask) -> tuple[LimitClaim, str]:
        """The claim of a leased task (and its type): the limits of its handler, none when it
        has none, its message cannot be decoded (the processor archives it) or a key failed
        (its handler's wrapper raises the key's error)."""
        msg = raw.msg
        if isinstance(msg, DecodeError):
            return LimitClaim(raw.id, ()), ""
        limits, owner = self.limits.resolve(msg.type)
        keyed: list[tuple[LimitSpec, str]] = []
        task = None
        for limit in limits:
            key = ""
            if limit.key is not None:
                if task is None:
                    task = task_for_handler(msg, raw.payload, raw.retried, 0, None)
                try:
                    key = key_text(limit.key(task))
                except Exception as exc:
                    owner.key_errors[raw.id] = LimitKeyError(
                        f"the key of limit {limit.name!r} failed for this task: "
                        f"{type(exc).__name__}: {exc}")
                    return LimitClaim(raw.id, ()), msg.type
            keyed.append((spec_of(limit), key))
        return LimitClaim(raw.id, keyed), msg.type

    def release(self, task_id: str) -> None:
        """The outcome of ``task_id`` was decided: give its slots back (soon, batched)."""
        held = self.holds.pop(task_id, None)
        if held is None:
            return
        queue, slots = held
        self._releases.setdefault(queue, []).extend(
            LimitHold(task_id, spec, key) for spec, key in slots)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    def forget(self, task_id: str) -> None:
        """The lease of ``task_id`` was lost: its slots stay tied to that lease."""
        self.holds.pop(task_id, None)

    async def _flush(self) -> None:
        await asyncio.sleep(0)  # let the releases of the same moment join this call
        while self._releases:
            queue, holds = self._releases.popitem()
            try:
                await self._ops.release(queue, self._owner, holds)
            except Exception as exc:  # the slots free when the leases end; waiters wake then
                self._log.warning("giving back limit slots failed; they free when the "
                                  "leases end", queue=queue, count=len(holds), error=str(exc))

    async def settled(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until the slots given back are written; then stop
        giving back (what is left frees when the leases end)."""
        flusher = self._flusher
        if flusher is None or flusher.done():
            return
        await asyncio.wait([flusher], timeout=timeout)
        if not flusher.done():
            flusher.cancel()
            await asyncio.wait([flusher])


def gate_for(handler: object, broker: Broker, owner: str, on_deferred: Callable[[int], None],
             observer: Any = None) -> LimitGate:
    """The gate of a worker running ``handler``: a ServeMux's limits (its handlers may get
    limits until the worker starts), or none for a plain handler function; the queues' caps
    either way."""
    limits = getattr(handler, "limits", None)
    if not isinstance(limits, HandlerLimits):
        limits = HandlerLimits(lambda _: None)
    return LimitGate(broker.limits, limits, owner, on_deferred, observer)

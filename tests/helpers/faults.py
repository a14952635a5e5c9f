"""One fault-injecting broker for tests: a Broker that hands every call to a real RedisBroker,
except the calls a test has armed a fault on (an outage, a lost reply, a hang, a bug)."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from asyncq import BrokerError
from asyncq._broker import RedisBroker
from asyncq._broker._connection import make_broker

#: The calls a worker makes to lease, renew, finish, forward and publish its state (a call of
#: an operation group is named ``group.method``).
WORKER_CALLS = ("dequeue", "extend_leases", "finish", "maintenance.forward", "workers.write")
#: The operation groups whose calls are counted and can be armed like the broker's own.
GROUPS = ("maintenance", "aggregation", "workers")


def injected_outage() -> BrokerError:
    """A Redis error the broker reports (the call did not run)."""
    return BrokerError("injected outage")


def lost_reply() -> BrokerError:
    """What a call whose reply never came looks like (it may have run)."""
    try:
        raise RedisConnectionError("Connection closed by server.")
    except RedisConnectionError as cause:
        err = BrokerError("call failed: Connection closed by server.", transient=True)
        err.__cause__ = cause
        return err


@dataclass(eq=False)
class Fault:
    """What happens to the armed calls while ``active``.

    ``when`` is ``"before"`` (raise instead of calling Redis: an outage or a bug), ``"after"``
    (call Redis, then raise: the reply was lost) or ``"hang"`` (never answer). ``times`` limits
    how often it fires (None: while active); ``only_if`` tests the real reply of an ``"after"``
    fault, which fires only when it returns True."""

    methods: tuple[str, ...]
    when: str
    error: Callable[[], BaseException] = injected_outage
    times: int | None = None
    only_if: Callable[[Any], bool] | None = None
    active: bool = True
    fired: int = 0
    replies: list[Any] = field(default_factory=list)

    def armed(self) -> bool:
        return self.active and (self.times is None or self.times > 0)

    def spend(self) -> None:
        self.fired += 1
        if self.times is not None:
            self.times -= 1


class FaultyBroker:
    """A Broker (by the protocol, not by inheritance) wrapping ``inner``; counts every call."""

    def __init__(self, inner: RedisBroker | Redis) -> None:
        self.inner: RedisBroker = inner if isinstance(inner, RedisBroker) else make_broker(inner)
        self.faults: list[Fault] = []
        self.calls: Counter[str] = Counter()
        self.closed = False

    def fault(self, *methods: str, when: str = "before",
              error: Callable[[], BaseException] = injected_outage, times: int | None = None,
              only_if: Callable[[Any], bool] | None = None, active: bool = True) -> Fault:
        """Arm a fault on ``methods`` (default: every call a worker makes) and return it; the
        test switches it with ``fault.active``."""
        if when not in ("before", "after", "hang"):
            raise ValueError(f"when must be 'before', 'after' or 'hang', not {when!r}")
        armed = Fault(methods or WORKER_CALLS, when, error, times, only_if, active)
        self.faults.append(armed)
        return armed

    async def close(self) -> None:
        self.closed = True
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name in GROUPS:
            return _Group(self, name, attr)
        if not asyncio.iscoroutinefunction(attr):
            return attr
        return functools.partial(self._call, name, attr)

    async def _call(self, name: str, method: Callable[..., Awaitable[Any]], *args: Any,
                    **kwargs: Any) -> Any:
        self.calls[name] += 1
        mine = [f for f in self.faults if name in f.methods and f.armed()]
        for f in mine:
            if f.when == "hang":
                f.spend()
                await asyncio.Event().wait()
            if f.when == "before":
                f.spend()
                raise f.error()
        reply = await method(*args, **kwargs)
        for f in mine:
            if f.when == "after" and (f.only_if is None or f.only_if(reply)):
                f.spend()
                f.replies.append(reply)
                raise f.error()
        return reply


class _Group:
    """An operation group of the inner broker whose calls go through ``broker._call`` as
    ``group.method``."""

    def __init__(self, broker: FaultyBroker, name: str, inner: Any) -> None:
        self._broker, self._name, self._inner = broker, name, inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr
        return functools.partial(self._broker._call, f"{self._name}.{name}", attr)

"""How a redis-py error becomes a BrokerError: the one place asyncq interprets Redis errors.

The broker maps every redis-py error here, once, where it meets it (like httpx maps transport
errors at its boundary): the BrokerError says what trying again can do (``transient``,
``refused``), and the redis-py error stays chained as ``__cause__`` for debugging only. Nothing
outside the broker looks at redis-py errors or at the text of a Redis error reply.
"""

from __future__ import annotations

from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    MaxConnectionsError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._errors import BrokerError

#: Error replies of a server that cannot serve the call for now (out of memory, running a slow
#: script, a read-only replica, no master or replicas yet, loading): the same call can succeed
#: later, so such a reply is not a refusal for good.
_FOR_NOW_REPLIES = ("OOM", "BUSY", "READONLY", "MASTERDOWN", "NOREPLICAS", "LOADING")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection failed, broke or timed out, or a cluster refused
    the command while failing over: the call may or may not have run."""
    return isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError | TimeoutError
                      | ClusterDownError | TryAgainError | SlotNotCoveredError)


def is_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is an error reply the same call meets however often it is tried."""
    return (isinstance(exc, ResponseError) and not is_transient(exc)
            and not str(exc).startswith(_FOR_NOW_REPLIES))


def broker_error(message: str, exc: BaseException) -> BrokerError:
    """The BrokerError reporting ``exc`` (chained from it) under ``message``."""
    error = BrokerError(message, transient=is_transient(exc), refused=is_refused(exc))
    error.__cause__ = exc
    return error


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says Redis could not be reached at all (not that it answered with an
    error, nor that it is loading or out of free connections)."""
    return (isinstance(exc, RedisConnectionError | RedisTimeoutError)
            and not isinstance(exc, BusyLoadingError | MaxConnectionsError))

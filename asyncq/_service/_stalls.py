"""The last stall of each event loop, so a Redis call that timed out because its loop was
blocked (a handler calling ``time.sleep`` in ``async def``) is not taken for Redis failing.

A read's timer runs on the loop: when the loop is blocked past the read's timeout, the timer
fires on the loop's first turn after the stall, however fast Redis answered. ``LoopWatch``
notes each stall when the loop turns again; ``Outage`` asks ``overlapped_stall`` in its failure
path only (nothing is asked while calls succeed).
"""

from __future__ import annotations

import asyncio
import time
import weakref

#: A loop turn at least this long is a stall that can make a Redis read time out.
MIN_STALL = 0.5
#: A timeout raised at most this long after a stall ended overlapped it: the read was waiting
#: through the stall (its timer fires on the loop's first turns after it).
RECENT = 2.0

_ended: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, float] = (
    weakref.WeakKeyDictionary())


def note_stall(loop: asyncio.AbstractEventLoop, blocked_s: float, ended: float) -> None:
    """``loop`` turned again at ``ended`` (monotonic) after ``blocked_s`` seconds."""
    if blocked_s >= MIN_STALL:
        _ended[loop] = ended


def overlapped_stall(exc: BaseException) -> bool:
    """Whether ``exc`` is a timeout raised on a loop that has just come out of a stall (so the
    stall, not Redis, made the call late). Called on the loop, in a failure path only."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    ended = _ended.get(loop)
    if ended is None or time.monotonic() - ended > RECENT:
        return False
    return timed_out(exc)


def timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` or an error it was raised from is a timeout (asyncio's, the socket's or
    the Redis client's, all named TimeoutError)."""
    seen: BaseException | None = exc
    for _ in range(6):
        if seen is None:
            return False
        if isinstance(seen, TimeoutError) or type(seen).__name__ == "TimeoutError":
            return True
        seen = seen.__cause__ or seen.__context__
    return False

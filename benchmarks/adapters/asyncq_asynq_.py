"""asyncq on asynq's Redis layout: asyncq's own ``Client`` and ``Worker`` with ``?wire=asynq``
appended to the Redis URL, so tasks are stored the way Go's asynq stores them (protobuf
``TaskMessage`` hashes, ``asynq:{default}:pending``). Everything else is the asyncq adapter.

Whether this asyncq has the feature is checked before the suite uses it:
``python -m benchmarks.adapters.asyncq_asynq_ URL`` enqueues one task and looks for it in
asynq's pending list; it prints why not and exits 1 when the wire format is not there.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncq
from benchmarks.adapters import asyncq_

PENDING = "asynq:{default}:pending"  # asynq's key layout (a wire-format fact, not asyncq's)


def wire_url(url: str) -> str:
    """``url`` with ``wire=asynq`` added to its query."""
    parts = urlsplit(url)
    query = f"{parts.query}&wire=asynq" if parts.query else "wire=asynq"
    return urlunsplit(parts._replace(query=query))


class Adapter(asyncq_.Adapter):
    NAME = "asyncq-asynq"
    NOTES = ("asyncq's Client and Worker with the Redis URL suffixed ?wire=asynq (asynq's "
             "key layout and protobuf task messages); otherwise as the asyncq column")

    async def open(self, url: str) -> None:
        await super().open(wire_url(url))

    async def start_listening(self, url: str) -> None:
        await super().start_listening(wire_url(url))

    async def stored(self, redis: Any) -> int:
        return int(await redis.llen(PENDING))

    @staticmethod
    def run_worker(url: str, concurrency: int, loop: str) -> None:
        asyncq_.Adapter.run_worker(wire_url(url), concurrency, loop)


async def probe(url: str) -> str | None:
    """None when asyncq writes asynq's layout for a ``?wire=asynq`` URL, else why not. Leaves
    one task behind: the caller flushes the server."""
    import redis.asyncio as aioredis

    try:
        client = asyncq.Client(wire_url(url))
        try:
            await client.enqueue("noop", {"i": 0})
        finally:
            await client.close()
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
    r = aioredis.Redis.from_url(url)
    try:
        n = int(await r.llen(PENDING))
    finally:
        await r.aclose()
    if n != 1:
        return f"a ?wire=asynq enqueue left {n} tasks in {PENDING}, expected 1"
    return None


if __name__ == "__main__":
    why = asyncio.run(probe(sys.argv[1]))
    print(why or "ok")
    sys.exit(1 if why else 0)

"""CPU per hand-off heard: the worker's hand-off listener on a push link of asyncq's own
(``_broker/_push.py``) against redis-py's PubSub (what a broker over a caller's own client
still uses), interleaved.

    .venv/bin/python -m benchmarks.push_listen [--n 3000] [--rounds 4]

A separate process publishes ``n`` hand-off messages 1 ms apart on one worker's channel; this
process listens through ``listen_handoffs`` and counts its own CPU time per message heard
(decoding included), less what it spends idle over the same time. CPU time, unlike latency,
holds up on a loaded machine. Not a test: nothing is asserted, nothing is saved.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import time

from redis.asyncio import Redis

from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from benchmarks._redis import RedisServer

_PUBLISHER = r"""
import sys, time, redis
r = redis.Redis.from_url(sys.argv[1])
msg = b'{"id":"a","type":"t","queue":"mq"}'
data = b"a\n0\n0\n99999999999999\n%d\n%s" % (len(msg), msg)
for _ in range(int(sys.argv[3])):
    r.spublish(sys.argv[2], data)
    time.sleep(0.001)
"""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _round(url: str, push: bool, n: int) -> float:
    """CPU µs per hand-off heard, on a push link (``push``) or redis-py's PubSub."""
    own = None if push else Redis.from_url(url)
    broker = make_broker(url if own is None else own)  # a caller's client: redis-py PubSub
    stream = broker.listen_handoffs(["mq"], "o")
    try:
        assert await anext(stream) is None
        publisher = subprocess.Popen(  # noqa: ASYNC220 (before the timing)
            [sys.executable, "-c", _PUBLISHER, url, K.queue_keys("mq").handoff_channel("o"),
             str(n)])
        await anext(stream)
        c0, t0 = _cpu(), time.monotonic()
        for _ in range(n - 1):
            await anext(stream)
        used, wall = _cpu() - c0, time.monotonic() - t0
        publisher.wait()
        c1 = _cpu()
        await asyncio.sleep(min(wall, 2.0))
        idle = (_cpu() - c1) / min(wall, 2.0) * wall
        return (used - idle) / (n - 1) * 1e6
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await broker.close()
        if own is not None:
            await own.aclose()


async def main_async(args: argparse.Namespace) -> None:
    results: dict[bool, list[float]] = {False: [], True: []}
    with RedisServer() as server:
        for r in range(args.rounds):
            for push in (False, True) if r % 2 == 0 else (True, False):
                results[push].append(await _round(server.url, push, args.n))
    for push, values in results.items():
        name = "push link" if push else "redis-py PubSub"
        print(f"{name:16} CPU per hand-off heard (µs): "
              + " ".join(f"{v:.1f}" for v in values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=4)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

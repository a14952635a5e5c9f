"""Enqueue a few quickstart tasks: ``python enqueue.py --redis-url redis://...``."""

from __future__ import annotations

import argparse
import asyncio

from tasks import send_email

import asyncq


async def main(redis_url: str) -> list[str]:
    async with asyncq.Client(redis_url) as client:
        ids = []
        for to in ("ada@example.com", "alan@example.com", "grace@example.com"):
            # A typed task: its arguments are checked here, before anything is written.
            info = await send_email.options(retention=3600).enqueue(client, to)
            ids.append(info.id)
            print(f"enqueued {info.type} {info.id} -> {info.state.value}")
        info = await client.enqueue("image:resize", b"\x89PNG fake bytes", retention=3600)
        ids.append(info.id)
        print(f"enqueued {info.type} {info.id} -> {info.state.value}")
        return ids


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6390/0")
    asyncio.run(main(parser.parse_args().redis_url))

"""The worker side of the Starlette example: ``asyncq worker tasks:mux``."""

from __future__ import annotations

import asyncq

mux = asyncq.ServeMux()
sent: list[str] = []


@mux.handler("email:welcome")
async def welcome(task: asyncq.Task) -> None:
    sent.append(task.json()["to"])

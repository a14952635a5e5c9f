"""A Starlette app that enqueues from an endpoint, with the Client opened in its lifespan.

    ASYNCQ_REDIS_URL=redis://127.0.0.1:6390/0 uvicorn app:app
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import asyncq


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[dict[str, asyncq.Client]]:
    """One Client (one connection pool) for the whole app."""
    async with asyncq.Client(os.environ.get("ASYNCQ_REDIS_URL", "redis://127.0.0.1:6390/0")) \
            as client:
        yield {"asyncq": client}


async def signup(request: Request) -> JSONResponse:
    """Enqueue the welcome email and answer at once; a worker sends it."""
    body = await request.json()
    if not isinstance(body.get("email"), str):
        return JSONResponse({"error": "email is required"}, status_code=400)
    client: asyncq.Client = request.state.asyncq
    info = await client.enqueue("email:welcome", {"to": body["email"]},
                                queue=os.environ.get("SIGNUP_QUEUE", "default"), max_retry=5)
    return JSONResponse({"task_id": info.id, "state": info.state.value}, status_code=202)


app = Starlette(routes=[Route("/signup", signup, methods=["POST"])], lifespan=lifespan)

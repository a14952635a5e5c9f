"""A FastAPI app that enqueues typed tasks and awaits their results.

    ASYNCQ_REDIS_URL=redis://127.0.0.1:6390/0 uvicorn app:app
    asyncq worker tasks:mux --redis-url redis://127.0.0.1:6390/0

``POST /reports/{name}`` stores a text in the background (202 + task id);
``GET /reports/{name}/summary?timeout=5`` runs the summary and waits for it (504 when the
worker does not answer in time).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel
from tasks import Summary, ingest, summarize

import asyncq


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, asyncq.Client]]:
    """One Client (one connection pool) for the whole app."""
    url = os.environ.get("ASYNCQ_REDIS_URL", "redis://127.0.0.1:6390/0")
    async with asyncq.Client(url) as client:
        yield {"asyncq": client}


app = FastAPI(lifespan=lifespan)


class Text(BaseModel):
    text: str


@app.post("/reports/{name}", status_code=202)
async def add_text(name: str, body: Text, request: Request) -> dict[str, str]:
    """Enqueue the ingestion and answer at once; a worker stores the words."""
    info = await ingest.enqueue(request.state.asyncq, name, body.text)
    return {"task_id": info.id, "state": info.state.value}


@app.get("/reports/{name}/summary")
async def summary(name: str, request: Request, timeout: float = 5.0) -> Summary:
    """Run the summary on a worker and wait for its typed result."""
    client: asyncq.Client = request.state.asyncq
    info = await summarize.enqueue(client, name, top=2)
    try:
        return await summarize.result(client, info, timeout=timeout)
    except TimeoutError:
        raise HTTPException(504, f"no summary within {timeout:g}s (task {info.id})") from None

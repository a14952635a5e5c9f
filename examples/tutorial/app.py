"""The tutorial's web app: enqueue an invoice, wait for it, and watch the queue.

    ASYNCQ_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn app:app
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel
from tasks import Invoice, Item, render_invoice

import asyncq
from asyncq.web import create_app

REDIS_URL = os.environ.get("ASYNCQ_REDIS_URL", "redis://127.0.0.1:6379/0")
dashboard = create_app(REDIS_URL)  # the web dashboard, mounted below


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """One Client (one connection pool) for the app's whole life."""
    async with asyncq.Client(REDIS_URL) as client:
        app.state.asyncq = client
        yield
    await dashboard.state.dashboard.close()  # a mounted app's own lifespan does not run


app = FastAPI(lifespan=lifespan)
app.mount("/admin/queues", dashboard)


class Order(BaseModel):
    customer: str
    items: list[Item]


@app.post("/invoices", status_code=202)
async def create_invoice(order: Order, request: Request) -> dict[str, str]:
    """Enqueue the rendering and answer at once with the task's id."""
    info = await render_invoice.enqueue(request.app.state.asyncq, order.customer, order.items)
    return {"task_id": info.id}


@app.get("/invoices/{task_id}")
async def get_invoice(task_id: str, request: Request, timeout: float = 5.0) -> Invoice:
    """Wait (up to ``timeout`` seconds) for the rendered invoice."""
    try:
        return await render_invoice.result(request.app.state.asyncq, task_id, timeout=timeout)
    except asyncq.WaitTimeoutError as exc:
        raise HTTPException(504, f"not rendered yet: {exc}") from None
    except asyncq.TaskFailedError as exc:
        raise HTTPException(422, exc.last_error or "rendering failed") from None

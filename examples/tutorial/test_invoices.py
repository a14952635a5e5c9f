"""The tutorial's tests: the pytest plugin runs a real Redis and an in-process worker."""

from __future__ import annotations

import httpx
import pytest
from app import app
from tasks import Invoice, Item, mux, render_invoice

pytestmark = pytest.mark.anyio


async def test_the_function_alone() -> None:
    invoice = await render_invoice("ada", [Item("tea", 350, quantity=2)])
    assert invoice == Invoice("ada", lines=1, total_cents=700)


async def test_an_invoice_is_rendered_by_a_worker(
    asyncq_fresh_redis: str, asyncq_worker, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("app.REDIS_URL", asyncq_fresh_redis)
    transport = httpx.ASGITransport(app=app)
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=transport, base_url="http://app") as http,
                asyncq_worker(mux)):
        created = await http.post("/invoices", json={
            "customer": "ada", "items": [{"name": "tea", "price_cents": 350, "quantity": 2},
                                         {"name": "cake", "price_cents": 420}]})
        assert created.status_code == 202
        invoice = await http.get(f"/invoices/{created.json()['task_id']}")
    assert invoice.json() == {"customer": "ada", "lines": 2, "total_cents": 1120}


async def test_an_empty_order_fails_without_retrying(
    asyncq_fresh_redis: str, asyncq_worker, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("app.REDIS_URL", asyncq_fresh_redis)
    transport = httpx.ASGITransport(app=app)
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=transport, base_url="http://app") as http,
                asyncq_worker(mux)):
        created = await http.post("/invoices", json={"customer": "ada", "items": []})
        failed = await http.get(f"/invoices/{created.json()['task_id']}")
    assert failed.status_code == 422
    assert "an invoice needs at least one item" in failed.json()["detail"]

"""The tutorial's tasks: render an invoice on a worker and return it, typed."""

from __future__ import annotations

import asyncio
import dataclasses

import asyncq

mux = asyncq.ServeMux()


@dataclasses.dataclass
class Item:
    name: str
    price_cents: int
    quantity: int = 1


@dataclasses.dataclass
class Invoice:
    customer: str
    lines: int
    total_cents: int


@mux.task("invoice:render", max_retry=3, timeout=30)
async def render_invoice(customer: str, items: list[Item]) -> Invoice:
    """Add up the items: the slow part (a PDF, an e-mail) would go here."""
    if not items:
        raise asyncq.SkipRetry("an invoice needs at least one item")  # retrying cannot help
    await asyncio.sleep(0.05)  # stands for rendering the PDF
    total = sum(item.price_cents * item.quantity for item in items)
    return Invoice(customer, len(items), total)

"""Task handlers of the quickstart: run them with ``asyncq worker tasks:mux``."""

from __future__ import annotations

import asyncio

import asyncq

mux = asyncq.ServeMux()


@mux.task("email:send", max_retry=5)
async def send_email(to: str, subject: str = "Welcome") -> dict[str, str]:
    """Pretend to send an email; the return value is the task's result. Enqueue it with
    ``await send_email.enqueue(client, "ada@example.com")``, or from anywhere by its name:
    ``client.enqueue("email:send", {"to": "ada@example.com"})``."""
    await asyncio.sleep(0.01)  # stands for the SMTP round trip
    return {"sent_to": to}


@mux.handler("image:")
async def process_image(task: asyncq.Task) -> None:
    """Handles every ``image:*`` type (prefix route); the payload is raw bytes."""
    await asyncio.sleep(0.01)
    await task.write_result(f"{task.type} processed {len(task.payload)} bytes".encode())


def log_middleware(handler: asyncq.Handler) -> asyncq.Handler:
    """Middleware: print each task as it starts."""

    async def wrapped(task: asyncq.Task) -> object:
        print(f"worker: running {task.type} {task.id}", flush=True)
        return await handler(task)

    return wrapped


mux.use(log_middleware)

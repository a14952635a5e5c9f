# ruff: noqa: F841
"""Typed-task calls for tests/typed/test_typed_mypy.py: the lines marked E<n> must be
the only ones mypy flags (never imported by the test suite)."""

from asyncq import Client, ServeMux, Task

mux = ServeMux()


@mux.task("email:send")
async def send_email(to: str, subject: str, *, urgent: bool = False) -> int:
    return 1


@mux.task("sync:add")
def add(task: Task, a: int, b: int = 0) -> float:
    return a + b


async def main(client: Client) -> None:
    await send_email.enqueue(client, "a@b.c", "Hi")
    await send_email.enqueue(client, to="a@b.c", subject="Hi", urgent=True)
    await send_email.options(process_in=60).enqueue(client, "a@b.c", "Hi")
    n: int = await send_email.result(client, "id", timeout=1)
    x: float = await add.result(client, "id")
    await add.enqueue(client, 1, b=2)
    await send_email.enqueue(client, "a@b.c")  # E1 missing subject
    await send_email.enqueue(client, "a@b.c", 3)  # E2 wrong type
    await send_email.enqueue(client, "a@b.c", "Hi", urgnt=True)  # E3 unknown keyword
    s: str = await send_email.result(client, "id")  # E4 result is an int
    await add.enqueue(client, "one")  # E5 wrong type

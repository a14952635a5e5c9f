"""Workflow pieces for tests/typed/test_typed_mypy.py: the lines marked E<n> must be the only
ones mypy flags (never imported by the test suite)."""

from asyncq import Client, Flow, ServeMux, Task, chain, chord, group

mux = ServeMux()


@mux.task("add")
async def add(x: int, y: int) -> int:
    return x + y


@mux.task("mul")
async def mul(x: int, factor: int) -> int:
    return x * factor


@mux.task("label")
async def label(n: int, prefix: str = "") -> str:
    return prefix + str(n)


@mux.task("total")
async def total(values: list[int]) -> int:
    return sum(values)


async def main(client: Client) -> None:
    flow: Flow[object, str] = chain(add.s(1, 2), mul.pipe(10), label.pipe(prefix="n="))
    text: str = await (await client.enqueue_workflow(flow)).result(client)
    fan: Flow[object, int] = chord([add.s(i, i) for i in range(3)], total.pipe())
    both: Flow[object, list[int]] = group(add.s(1, 1), mul.s(2, 3))
    raw = chain(Task("fetch", {"url": "x"}), Task("parse"), label.pipe())
    n: int = await (await client.enqueue_workflow(fan)).result(client)
    add.s(1, "2")  # E1 wrong argument type
    mul.pipe(2, 3)  # E2 too many: the first argument comes from the previous step
    label.pipe(prefix=3)  # E3 wrong keyword type
    wrong: str = await (await client.enqueue_workflow(fan)).result(client)  # E4 an int
    del text, both, raw, n, wrong

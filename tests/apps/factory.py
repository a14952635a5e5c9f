"""Worker targets of the CLI tests: factories, a broken handler and a module that raises."""

from __future__ import annotations

from asyncq import ServeMux, Task


def make_mux() -> ServeMux:
    """A factory: ``asyncq worker tests.apps.factory:make_mux`` calls it."""
    mux = ServeMux()

    @mux.handler("factory:echo")
    async def echo(task: Task) -> object:
        return {"made_by": "factory", "got": task.json()}

    return mux


async def make_mux_async() -> ServeMux:
    """An async factory: needs ``--factory``."""
    return make_mux()


async def no_argument() -> None:
    """Not a handler: it does not take the task."""


def not_a_handler_maker() -> int:
    return 42

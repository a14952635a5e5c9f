"""ServeMux: routing by exact type and longest prefix, registration errors, middleware order."""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any

import pytest

import asyncq
from asyncq import HandlerNotFoundError, ServeMux, Task

pytestmark = pytest.mark.anyio


def _named(name: str) -> asyncq.Handler:
    async def handler(task: Task) -> str:
        return name

    return handler


@pytest.mark.parametrize(
    ("task_type", "expected"),
    [
        ("email:deliver", "exact"),
        ("email:welcome", "email"),
        ("image:resize", "image"),
        ("image:resize:thumb", "thumb"),
        ("image:resize:thumbnail", "thumb"),
        ("image:", "image"),
        ("imagex", "im"),
    ],
)
async def test_routes_exact_then_longest_prefix(task_type: str, expected: str) -> None:
    mux = ServeMux()
    mux.handle("email:", _named("email"))
    mux.handle("email:deliver", _named("exact"))
    mux.handle("im", _named("im"))
    mux.handle("image:", _named("image"))
    mux.handle("image:resize:thumb", _named("thumb"))
    assert await mux(Task(task_type)) == expected


async def test_unknown_type_raises_handler_not_found() -> None:
    mux = ServeMux()
    mux.handle("email:", _named("email"))
    with pytest.raises(HandlerNotFoundError, match="'sms:send'"):
        await mux(Task("sms:send"))
    assert mux.match("sms:send") is None


async def test_decorator_registers_and_returns_the_function() -> None:
    mux = ServeMux()

    @mux.handler("report:build")
    async def build(task: Task) -> str:
        return "built"

    assert mux.match("report:build") is build
    assert await mux(Task("report:build")) == "built"
    assert mux.patterns() == ["report:build"]


@pytest.mark.parametrize("pattern", ["", "   "])
def test_blank_pattern_is_rejected(pattern: str) -> None:
    with pytest.raises(ValueError, match="non-blank"):
        ServeMux().handle(pattern, _named("x"))


def test_duplicate_pattern_is_rejected() -> None:
    mux = ServeMux()
    mux.handle("a", _named("x"))
    with pytest.raises(ValueError, match="already registered"):
        mux.handle("a", _named("y"))


def test_non_callable_handler_and_middleware_are_rejected() -> None:
    mux = ServeMux()
    with pytest.raises(TypeError, match="must be a function taking the task"):
        mux.handle("a", "not a handler")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a function taking the task"):
        mux.handle("b", None)  # type: ignore[arg-type]
    assert mux.patterns() == []
    with pytest.raises(TypeError, match="callable"):
        mux.use(42)  # type: ignore[arg-type]


async def test_middlewares_first_added_is_outermost() -> None:
    calls: list[str] = []

    def tracer(name: str) -> asyncq.Middleware:
        def middleware(next_handler: asyncq.Handler) -> asyncq.Handler:
            async def wrapped(task: Task) -> Any:
                calls.append(f"{name}>")
                result = await next_handler(task)
                calls.append(f"<{name}")
                return f"{name}({result})"

            return wrapped

        return middleware

    mux = ServeMux()
    mux.use(tracer("outer"))

    @mux.handler("job")
    async def job(task: Task) -> str:
        calls.append("handler")
        return "r"

    mux.use(tracer("mid"), tracer("inner"))  # added after a handler: still applies
    assert await mux(Task("job")) == "outer(mid(inner(r)))"
    assert calls == ["outer>", "mid>", "inner>", "handler", "<inner", "<mid", "<outer"]


async def test_middlewares_wrap_the_not_found_handler_too() -> None:
    seen: list[str] = []

    def middleware(next_handler: asyncq.Handler) -> asyncq.Handler:
        async def wrapped(task: Task) -> Any:
            seen.append(task.type)
            return await next_handler(task)

        return wrapped

    mux = ServeMux()
    mux.use(middleware)
    with pytest.raises(HandlerNotFoundError):
        await mux(Task("nothing:here"))
    assert seen == ["nothing:here"]


async def test_registering_after_a_dispatch_takes_effect() -> None:
    mux = ServeMux()
    mux.handle("a:", _named("prefix"))
    assert await mux(Task("a:b")) == "prefix"
    mux.handle("a:b", _named("exact"))
    assert await mux(Task("a:b")) == "exact"


async def test_a_sync_handler_is_registered_to_run_in_a_thread() -> None:
    """A regular function (or an object with a sync __call__) is a handler: the mux awaits it
    in a worker thread, never on the event loop; async ones are registered as they are."""
    mux = ServeMux()
    loop_thread = threading.get_ident()
    ran: list[tuple[str, bool]] = []

    def sync_handler(task: Task) -> str:
        ran.append((task.type, threading.get_ident() != loop_thread))
        return f"sync {task.type}"

    class SyncCallable:
        def __call__(self, task: Task) -> str:
            ran.append((task.type, threading.get_ident() != loop_thread))
            return "object"

    assert mux.handler("a")(sync_handler) is sync_handler  # the decorator returns it as is
    mux.handle("b", SyncCallable())
    mux.handler("c")(lambda task: task.type.upper())
    assert await mux(Task("a")) == "sync a"
    assert await mux(Task("b")) == "object"
    assert await mux(Task("c")) == "C"
    assert ran == [("a", True), ("b", True)]
    wrapper = mux.match("a")
    assert wrapper is not None and inspect.iscoroutinefunction(wrapper)
    assert getattr(wrapper, "__wrapped__", None) is sync_handler

    class Callable:
        async def __call__(self, task: Task) -> None: ...

    async_object = Callable()
    mux.handle("d", async_object)  # an object with an async __call__ is registered as is
    partial = functools.partial(_named("p"))
    mux.handle("e", partial)  # so is a partial of an async function
    assert mux.match("d") is async_object and mux.match("e") is partial
    asyncq.Worker("redis://127.0.0.1:1/0", mux)
    asyncq.Worker("redis://127.0.0.1:1/0", sync_handler)

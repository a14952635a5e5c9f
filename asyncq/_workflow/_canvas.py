"""The workflow canvas: steps, and the chains, groups and chords composed of them.

A ``Flow[I, O]`` takes an input of type ``I`` (the value of what ran before it) and produces
an ``O``. A step built from a full call (``add.s(1, 2)``, a ``Task``) ignores its input
(``Flow[object, R]``); one built with ``pipe`` (``mul.pipe(3)``) receives it as its first
argument, so ``chain(add.s(1, 2), mul.pipe(3))`` type-checks only when ``add`` returns what
``mul`` takes first. Nothing here touches Redis: ``enqueue`` hands the canvas to _start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from .._task import Task
from ._info import WorkflowHandle

if TYPE_CHECKING:
    from .._client import Client

I = TypeVar("I", contravariant=True)  # noqa: E741
O = TypeVar("O", covariant=True)  # noqa: E741
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")
E = TypeVar("E")
F = TypeVar("F")
X = TypeVar("X")
R = TypeVar("R")

Decode = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


class Flow(Generic[I, O]):
    """A composable piece of a workflow: a step, a chain, a group or a chord."""

    __slots__ = ()

    def decoder(self) -> Decode:
        """Turns the stored JSON value of this piece back into an ``O``."""
        raise NotImplementedError

    async def enqueue(self, client: Client, *, workflow_id: str | None = None,
                      on_error: Flow[Any, Any] | Task | tuple[str, Any] | None = None,
                      retention: float = 86_400.0,
                      after: Sequence[Any] = ()) -> WorkflowHandle[O]:
        """Start this workflow: its first steps are enqueued, the others wait in Redis for
        the steps before them. ``on_error``: a step run once if the workflow fails (a piped
        step receives ``{"workflow_id", "step_id", "type", "error"}``). ``retention``
        (seconds): how long the workflow's state is kept once it ended. ``after``: tasks
        (TaskInfo, ``(queue, id)`` or an id in the first step's queue) that must succeed
        first. Raises ValueError/TypeError before anything is written."""
        from ._start import start_workflow  # noqa: PLC0415 (_start imports this module)
        return await start_workflow(client.broker, self, workflow_id=workflow_id,
                                    on_error=on_error, retention=retention, after=after)


@dataclass(frozen=True, eq=False, slots=True)
class Step(Flow[I, O]):
    """One task of a workflow. ``mode``: how it receives its input: '' not at all, 'r' as
    its payload (a raw Task without payload), else the name of the typed argument."""

    task: Task
    mode: str = ""
    decode: Decode = field(default=_same, repr=False)
    options: dict[str, Any] = field(default_factory=dict)  # applied over the Task's own

    def decoder(self) -> Decode:
        return self.decode


@dataclass(frozen=True, eq=False, slots=True)
class Chain(Flow[I, O]):
    """Pieces run one after the other, each given the value of the one before."""

    parts: tuple[Flow[Any, Any], ...]

    def decoder(self) -> Decode:
        return self.parts[-1].decoder()


@dataclass(frozen=True, eq=False, slots=True)
class Group(Flow[I, O]):
    """Pieces run side by side, each given the group's input; its value is the list of
    their values, in order."""

    parts: tuple[Flow[Any, Any], ...]

    def decoder(self) -> Decode:
        decoders = [p.decoder() for p in self.parts]
        if all(d is _same for d in decoders):
            return _same

        def decode(value: Any) -> Any:
            return [d(v) for d, v in zip(decoders, value, strict=True)]
        return decode


def as_flow(item: object, what: str) -> Flow[Any, Any]:
    """A canvas piece from what the user gave: a Flow, a Task, or a ``(type, payload)`` pair
    (a raw Task without payload receives its input as its payload)."""
    if isinstance(item, Flow):
        return item
    if isinstance(item, Task):
        return Step(item, "r" if item.encoding == "n" else "")
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return as_flow(Task(item[0], item[1]), what)
    if isinstance(item, str):
        return as_flow(Task(item), what)
    raise TypeError(f"{what}: expected a step (a typed task's .s()/.pipe(), a Task or a "
                    f"(type, payload) pair), a chain, group or chord, got {item!r}")


def _parts(items: Sequence[object], what: str) -> tuple[Flow[Any, Any], ...]:
    if not items:
        raise ValueError(f"{what} needs at least one step")
    return tuple(as_flow(item, f"{what} item {i}") for i, item in enumerate(items))


@overload
def chain(a: Flow[I, A], /) -> Flow[I, A]: ...
@overload
def chain(a: Flow[I, A], b: Flow[A, B], /) -> Flow[I, B]: ...
@overload
def chain(a: Flow[I, A], b: Flow[A, B], c: Flow[B, C], /) -> Flow[I, C]: ...
@overload
def chain(a: Flow[I, A], b: Flow[A, B], c: Flow[B, C], d: Flow[C, D], /) -> Flow[I, D]: ...
@overload
def chain(a: Flow[I, A], b: Flow[A, B], c: Flow[B, C], d: Flow[C, D], e: Flow[D, E],
          /) -> Flow[I, E]: ...
@overload
def chain(a: Flow[I, A], b: Flow[A, B], c: Flow[B, C], d: Flow[C, D], e: Flow[D, E],
          f: Flow[E, F], /) -> Flow[I, F]: ...
@overload
def chain(*steps: Flow[Any, Any] | Task | tuple[str, Any]) -> Flow[Any, Any]: ...


def chain(*steps: Flow[Any, Any] | Task | tuple[str, Any]) -> Flow[Any, Any]:
    """Steps run one after the other; each receives the previous one's value (a step that
    takes no input just waits for it). Up to six steps are type-checked pairwise."""
    return Chain(_parts(steps, "chain"))


@overload
def group(*steps: Flow[I, X]) -> Flow[I, list[X]]: ...
@overload
def group(*steps: Flow[Any, Any] | Task | tuple[str, Any]) -> Flow[Any, list[Any]]: ...


def group(*steps: Flow[Any, Any] | Task | tuple[str, Any]) -> Flow[Any, list[Any]]:
    """Steps run side by side (fan-out); the group's value is the list of their values in
    order. Pass many with ``group(*(add.s(i, i) for i in range(10_000)))``."""
    return Group(_parts(steps, "group"))


@overload
def chord(header: Flow[I, list[X]], callback: Flow[list[X], R], /) -> Flow[I, R]: ...
@overload
def chord(header: Sequence[Flow[I, X]], callback: Flow[list[X], R], /) -> Flow[I, R]: ...
@overload
def chord(header: Any, callback: Flow[Any, R] | Task | tuple[str, Any], /) -> Flow[Any, Any]:
    ...


def chord(header: Any, callback: Any, /) -> Flow[Any, Any]:
    """A group (or a list of steps) whose list of values feeds ``callback`` once every
    member succeeded (fan-in): ``chain(group(...), callback)``."""
    head = header if isinstance(header, Flow) else Group(_parts(list(header), "chord"))
    return Chain((head, as_flow(callback, "chord callback")))

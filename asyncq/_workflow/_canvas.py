"""The workflow canvas: steps, and the chains, groups and chords composed of them.

A ``Flow[I, O]`` takes an input of type ``I`` (the value of what ran before it) and produces
an ``O``. A step built from a full call (``add.s(1, 2)``) or a raw ``Task`` ignores its
input; one built with ``pipe`` (``mul.pipe(3)``) receives it as its first argument, so
``chain(add.s(1, 2), mul.pipe(3))`` type-checks only when ``add`` returns what ``mul`` takes
first. Nothing here touches Redis: ``Client.enqueue_workflow`` starts a canvas (_start).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, Unpack, overload

from .._model._flow import Flow, I, O, same
from .._model._options import TaskOptions, parse_options
from .._model._task import Task

A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")
E = TypeVar("E")
F = TypeVar("F")
X = TypeVar("X")
R = TypeVar("R")

Decode = Callable[[Any], Any]

#: Options a workflow step cannot take: it runs when the steps before it are done, alone.
NOT_FOR_STEPS = ("process_at", "process_in", "group", "unique", "unique_key")


def check_step_options(options: dict[str, Any], what: str) -> None:
    """Options of a workflow step, validated as enqueue options are, less those a step
    cannot take: a ValueError/TypeError when the step is built, not when it is started."""
    parse_options(options)
    refused = [name for name in NOT_FOR_STEPS if options.get(name) is not None]
    if refused:
        raise ValueError(f"{what}: a workflow step cannot take {', '.join(refused)} (it runs "
                         f"when the steps before it are done, in no group, never unique)")


@dataclass(frozen=True, eq=False, slots=True)
class Step(Flow[I, O]):
    """One task of a workflow. ``mode``: how it receives its input: '' not at all, 'r' as
    its payload (a raw Task without payload), else the name of the typed argument."""

    task: Task
    mode: str = ""
    decode: Decode = field(default=same, repr=False)
    overrides: dict[str, Any] = field(default_factory=dict)  # applied over the Task's own

    def options(self, **options: Unpack[TaskOptions]) -> Step[I, O]:
        """This step with some task options changed (``queue``, ``max_retry``, ``timeout``,
        ``retention``, ``task_id``, ``headers``...): ``add.s(1, 2).options(queue="q")`` is the
        same step as ``add.options(queue="q").s(1, 2)``. A bad option raises here."""
        merged = {**self.overrides, **options}
        check_step_options(merged, f"step {self.task.type!r}")
        return Step(self.task, self.mode, self.decode, merged)

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
        if all(d is same for d in decoders):
            return same

        def decode(value: Any) -> Any:
            return [d(v) for d, v in zip(decoders, value, strict=True)]
        return decode


def as_flow(item: object, what: str) -> Flow[Any, Any]:
    """A canvas piece from what the user gave: a Flow, a Task (one without payload receives
    its input as its payload), a ``(type, payload)`` pair or a type name."""
    if isinstance(item, Task):
        return Step(item, "r" if item.encoding == "n" else "")
    if isinstance(item, Flow):
        return item
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
def chain(a: Flow[Any, Any], b: Flow[Any, Any], c: Flow[Any, Any], d: Flow[Any, Any],
          e: Flow[Any, Any], f: Flow[Any, Any], g: Flow[Any, Any], /,
          *more: Flow[Any, Any]) -> Flow[Any, Any]: ...


def chain(*steps: object) -> Flow[Any, Any]:
    """Steps run one after the other; each receives the previous one's value (a step that
    takes no input just waits for it). Up to six pieces are type-checked pairwise; a raw
    Task is a ``Flow[Any, Any]`` (``(type, payload)`` pairs work too, untyped)."""
    return Chain(_parts(steps, "chain"))


def group(*steps: Flow[I, X]) -> Flow[I, list[X]]:
    """Steps run side by side (fan-out); the group's value is the list of their values in
    order. Pass many with ``group(*(add.s(i, i) for i in range(10_000)))``."""
    return Group(_parts(steps, "group"))


@overload
def chord(header: Flow[I, list[X]], callback: Flow[list[X], R], /) -> Flow[I, R]: ...
@overload
def chord(header: Sequence[Flow[I, X]], callback: Flow[list[X], R], /) -> Flow[I, R]: ...


def chord(header: Any, callback: Any, /) -> Flow[Any, Any]:
    """A group (or a list of steps) whose list of values feeds ``callback`` once every
    member succeeded (fan-in): ``chain(group(...), callback)``."""
    head = header if isinstance(header, Flow) and not isinstance(header, Task) else Group(
        _parts(list(header), "chord"))
    return Chain((head, as_flow(callback, "chord callback")))

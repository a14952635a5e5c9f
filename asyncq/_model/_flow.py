"""The base of every workflow piece (a step, chain, group or chord) and of Task itself, so a
raw Task composes with typed steps: ``Flow[I, O]`` takes an input ``I`` and produces ``O``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

I = TypeVar("I", contravariant=True)  # noqa: E741
O = TypeVar("O", covariant=True)  # noqa: E741


def same(value: Any) -> Any:
    return value


class Flow(Generic[I, O]):
    """A composable piece of a workflow (see ``asyncq.chain``)."""

    __slots__ = ()

    def decoder(self) -> Callable[[Any], Any]:
        """Turns the stored JSON value of this piece back into an ``O``."""
        return same

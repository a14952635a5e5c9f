"""A typed task function's signature: binds enqueue arguments to a JSON payload and turns a
payload back into the call, each parameter decoded to its annotation."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import orjson

from .._errors import SkipRetry
from .._model._task import Task
from ._codec import Decoder, decoder, dumps, to_json_value


class TaskSignature:
    """What a task function takes (its leading ``Task`` parameter, if any, aside) and
    returns."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        full = inspect.signature(fn)
        hints = _hints(name, fn)
        params = list(full.parameters.values())
        self.takes_task = bool(params) and hints.get(params[0].name) is Task
        if self.takes_task:
            params = params[1:]
        self.signature = full.replace(parameters=params)
        self.params = {p.name: p for p in params}
        self.decoders: dict[str, Decoder] = {}
        for p in params:
            hint = hints.get(p.name, Any)
            if p.kind is p.VAR_POSITIONAL:
                hint = list[hint]  # type: ignore[valid-type]
            elif p.kind is p.VAR_KEYWORD:
                hint = dict[str, hint]  # type: ignore[valid-type]
            self.decoders[p.name] = decoder(hint)
        self.returns: Decoder = decoder(hints.get("return", Any))
        # The call can be made with keywords only unless a parameter is positional-only or
        # variadic: the fast path of every call.
        self._by_keyword = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                               for p in params)

    def payload(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
        """The JSON payload of a call: ``{parameter: value}`` for the arguments given
        (defaults are applied by the worker). Raises TypeError, before anything is written,
        for a call the function would refuse or a value of the wrong type."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"task {self.name!r}: {exc}") from None
        arguments = bound.arguments
        try:
            raw = dumps(arguments)
        except TypeError as exc:
            raise TypeError(f"task {self.name!r}: an argument cannot be stored: {exc}") from None
        self.check(arguments, raw)
        return raw

    def piped_payload(self, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> tuple[str, bytes]:
        """For a workflow step fed by the step before it: the name of the first parameter
        (which receives that input) and the JSON payload of the other arguments."""
        params = list(self.params.values())
        if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                inspect.Parameter.POSITIONAL_OR_KEYWORD):
            raise TypeError(f"task {self.name!r} takes no positional parameter to receive "
                            "the previous step's value: use .s(...) instead of .pipe(...)")
        rest = self.signature.replace(parameters=params[1:])
        try:
            bound = rest.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"task {self.name!r}: {exc}") from None
        try:
            raw = dumps(bound.arguments)
        except TypeError as exc:
            raise TypeError(f"task {self.name!r}: an argument cannot be stored: {exc}") from None
        self.check(bound.arguments, raw)
        return params[0].name, raw

    def check(self, arguments: dict[str, Any], raw: bytes) -> None:
        """Every argument, once stored, decodes back to its annotated type."""
        if not arguments:
            return
        for key, value in orjson.loads(raw).items():
            try:
                self.decoders[key](value)
            except TypeError as exc:
                raise TypeError(f"task {self.name!r}: argument {key!r}: {exc}") from None

    def call_args(self, data: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments for the function from a stored payload; a payload that does not fit
        the signature raises SkipRetry (running it again would fail the same way)."""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise SkipRetry(f"task {self.name!r} expects a JSON object of its arguments "
                            f"({', '.join(self.params)}), got {type(data).__name__}")
        decoded: dict[str, Any] = {}
        for key, value in data.items():
            decode = self.decoders.get(key)
            if decode is None:
                raise SkipRetry(f"task {self.name!r} got an unexpected argument {key!r}")
            try:
                decoded[key] = decode(value)
            except TypeError as exc:
                raise SkipRetry(f"task {self.name!r}: argument {key!r}: {exc}") from None
        if self._by_keyword:
            for p in self.params.values():
                if p.name not in decoded and p.default is p.empty:
                    raise SkipRetry(f"task {self.name!r} is missing the argument {p.name!r}")
            return (), decoded
        bound = inspect.BoundArguments(self.signature, decoded)
        try:
            self.signature.bind(*bound.args, **bound.kwargs)
        except TypeError as exc:
            raise SkipRetry(f"task {self.name!r}: {exc}") from None
        return bound.args, bound.kwargs

    def result_value(self, value: Any) -> Any:
        """What the handler returns for the worker to store: plain JSON data."""
        return to_json_value(value)


def _hints(name: str, fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # a NameError, or anything an annotation's evaluation raises
        raise TypeError(
            f"task {name!r}: the annotations of {getattr(fn, '__qualname__', fn)!r} cannot be "
            f"resolved ({exc}); define the types they name at module level") from exc

"""Values of typed tasks to JSON and back, guided by the function's annotations.

Arguments and results are stored as plain JSON (readable by any service and by the CLI);
decoders built once per annotation turn the JSON back into the annotated types: str, int,
float, bool, None, bytes (base64), datetime/date/time, timedelta (seconds), UUID, Decimal,
Enum, Literal, lists/tuples/sets, dicts, unions/Optional, dataclasses and pydantic models.
An annotation it cannot decode is left as JSON gives it (Any).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson

Decoder = Callable[[Any], Any]

_JSON_PLAIN = (str, int, float, bool, type(None))


def _default(value: Any) -> Any:
    """What orjson cannot write itself: pydantic models, bytes, Decimal, sets, timedelta."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    raise TypeError(f"{type(value).__name__} cannot be stored as JSON")


def dumps(value: Any) -> bytes:
    """``value`` as JSON; raises TypeError naming what cannot be stored."""
    try:
        return orjson.dumps(value, default=_default)
    except orjson.JSONEncodeError as exc:
        raise TypeError(str(exc)) from exc


def to_json_value(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, str, numbers, bool, None)."""
    if isinstance(value, _JSON_PLAIN):
        return value
    return orjson.loads(dumps(value))


class _Fail(TypeError):
    pass


def _fail(expected: str, value: Any) -> _Fail:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return _Fail(f"expected {expected}, got {shown}")


def _any(value: Any) -> Any:
    return value


def _scalar(kind: type) -> Decoder:
    def decode(value: Any) -> Any:
        if type(value) is kind:
            return value
        raise _fail(kind.__name__, value)
    return decode


def _float(value: Any) -> float:
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    raise _fail("float", value)


def _none(value: Any) -> None:
    if value is not None:
        raise _fail("None", value)


def _parse(kind: type, parse: Callable[[Any], Any], from_types: tuple[type, ...] = (str,)
           ) -> Decoder:
    def decode(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if isinstance(value, from_types) and not isinstance(value, bool):
            try:
                return parse(value)
            except (ValueError, TypeError, ArithmeticError) as exc:
                raise _fail(kind.__name__, value) from exc
        raise _fail(kind.__name__, value)
    return decode


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except ValueError as exc:
            raise _fail("base64 bytes", value) from exc
    raise _fail("bytes", value)


_SIMPLE: dict[Any, Decoder] = {
    Any: _any, object: _any, str: _scalar(str), int: _scalar(int), bool: _scalar(bool),
    float: _float, type(None): _none, None: _none, bytes: _bytes,
    dt.datetime: _parse(dt.datetime, dt.datetime.fromisoformat),
    dt.date: _parse(dt.date, dt.date.fromisoformat),
    dt.time: _parse(dt.time, dt.time.fromisoformat),
    dt.timedelta: _parse(dt.timedelta, lambda s: dt.timedelta(seconds=s), (int, float)),
    UUID: _parse(UUID, UUID),
    Decimal: _parse(Decimal, Decimal, (str, int, float)),
}


def decoder(annotation: Any) -> Decoder:
    """A function turning JSON data into a value of ``annotation`` (raising TypeError)."""
    found = _SIMPLE.get(annotation)
    if found is not None:
        return found
    if isinstance(annotation, typing.NewType):
        return decoder(annotation.__supertype__)
    if isinstance(annotation, typing.TypeVar):
        return _any
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return decoder(args[0])
    if origin is typing.Union or origin is types.UnionType:
        return _union(annotation, [decoder(a) for a in args])
    if origin is typing.Literal:
        return _literal(args)
    if origin in (list, Sequence, set, frozenset, typing.AbstractSet):
        return _sequence(origin, decoder(args[0]) if args else _any)
    if origin is tuple:
        return _tuple(args)
    if origin in (dict, Mapping):
        return _mapping(decoder(args[1]) if len(args) == 2 else _any)
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return _enum(annotation)
        if dataclasses.is_dataclass(annotation):
            return _dataclass(annotation)
        validate = getattr(annotation, "model_validate", None)
        if callable(validate):
            return _pydantic(annotation, validate)
        if annotation in (list, tuple, set, frozenset):
            return _sequence(annotation, _any)
        if annotation is dict:
            return _mapping(_any)
    return _any


def _union(annotation: Any, arms: list[Decoder]) -> Decoder:
    def decode(value: Any) -> Any:
        for arm in arms:
            try:
                return arm(value)
            except TypeError:
                continue
        raise _fail(_name(annotation), value)
    return decode


def _literal(choices: tuple[Any, ...]) -> Decoder:
    def decode(value: Any) -> Any:
        for choice in choices:
            if value == choice and type(value) is type(choice):
                return choice
        raise _fail(f"one of {list(choices)!r}", value)
    return decode


def _sequence(kind: Any, item: Decoder) -> Decoder:
    build: Callable[[Any], Any] = (list if kind in (list, Sequence)
                                   else frozenset if kind is frozenset else set)

    def decode(value: Any) -> Any:
        if not isinstance(value, list | tuple | set | frozenset):
            raise _fail("a list", value)
        if item is _any:
            return build(value)
        return build([item(v) for v in value])
    return decode


def _tuple(args: tuple[Any, ...]) -> Decoder:
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        each = decoder(args[0]) if args else _any

        def decode_var(value: Any) -> Any:
            if not isinstance(value, list | tuple):
                raise _fail("a list", value)
            return tuple(each(v) for v in value)
        return decode_var
    items = [decoder(a) for a in args]

    def decode(value: Any) -> Any:
        if not isinstance(value, list | tuple) or len(value) != len(items):
            raise _fail(f"a list of {len(items)}", value)
        return tuple(d(v) for d, v in zip(items, value, strict=True))
    return decode


def _mapping(item: Decoder) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _fail("an object", value)
        if item is _any:
            return value
        return {k: item(v) for k, v in value.items()}
    return decode


def _enum(kind: type[enum.Enum]) -> Decoder:
    def decode(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError as exc:
            raise _fail(kind.__name__, value) from exc
    return decode


def _dataclass(kind: type) -> Decoder:
    hints = typing.get_type_hints(kind)
    fields = {f.name: decoder(hints.get(f.name, Any))
              for f in dataclasses.fields(kind) if f.init}

    def decode(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if not isinstance(value, dict):
            raise _fail(kind.__name__, value)
        unknown = set(value) - set(fields)
        if unknown:
            raise _Fail(f"{kind.__name__} has no field {sorted(unknown)[0]!r}")
        try:
            return kind(**{k: fields[k](v) for k, v in value.items()})
        except _Fail:
            raise
        except TypeError as exc:  # a missing field
            raise _Fail(f"{kind.__name__}: {exc}") from exc
    return decode


def _pydantic(kind: type, validate: Callable[[Any], Any]) -> Decoder:
    def decode(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        try:
            return validate(value)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise _Fail(f"{kind.__name__}: {exc}") from exc
    return decode


def _name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or repr(annotation).replace("typing.", "")

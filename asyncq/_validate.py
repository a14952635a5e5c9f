"""Validation of user settings, one rule per kind of value: durations, counts, flags, text.

Enqueue options, ``WorkerConfig`` and ``ConnectionOptions`` convert every duration with
``to_seconds``/``to_ms``, so they accept and refuse the same values. ``check_fields`` validates
a settings dataclass from its field annotations, so a new field needs no new check.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, overload

MAX_DURATION_MS = 10_000 * 366 * 86_400_000
"""Longest duration accepted (10 000 years): keeps every stored time an exact integer in JSON,
in Lua (doubles) and in sorted-set scores."""

NONZERO: Mapping[str, Any] = types.MappingProxyType({"nonzero": True})
"""Field metadata for ``check_fields``: 0 is refused (a duration must be > 0, a count >= 1)."""


class DurationTypeError(TypeError, ValueError):
    """A duration that is neither seconds (int/float) nor a timedelta; a bool is refused too.

    Also a ValueError, because ``ConnectionOptions`` has always reported every bad value, of any
    type, as ValueError (``WorkerConfig`` and the enqueue options as TypeError).
    """


@overload
def to_seconds(value: object, name: str, *, allow_zero: bool = ...,
               allow_none: Literal[False] = ...) -> float: ...
@overload
def to_seconds(value: object, name: str, *, allow_zero: bool = ...,
               allow_none: bool) -> float | None: ...
def to_seconds(value: object, name: str, *, allow_zero: bool = True,
               allow_none: bool = False) -> float | None:
    """Seconds (int/float) or a timedelta as float seconds: finite, >= 0 (> 0 unless
    ``allow_zero``), at most 10 000 years; ``None`` passes when ``allow_none``.

    Raises DurationTypeError (a bool, a string...) or ValueError naming ``name``.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond the float range
            raise ValueError(f"{name} must be at most 10000 years, got {value!r}") from None
    else:
        or_none = " or None" if allow_none else ""
        raise DurationTypeError(
            f"{name} must be seconds (int/float) or a timedelta{or_none}, got {value!r}")
    if not math.isfinite(seconds):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
    if seconds < 0 or (not allow_zero and seconds == 0):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    if round(seconds * 1000) > MAX_DURATION_MS:
        raise ValueError(f"{name} must be at most 10000 years, got {value!r}")
    return seconds


def to_ms(value: object, name: str, *, allow_zero: bool = True) -> int:
    """``to_seconds`` rounded to whole milliseconds (how durations are stored in Redis)."""
    return round(to_seconds(value, name, allow_zero=allow_zero) * 1000)


@overload
def to_int(value: object, name: str, *, minimum: int = ...,
           allow_none: Literal[False] = ...) -> int: ...
@overload
def to_int(value: object, name: str, *, minimum: int = ..., allow_none: bool) -> int | None: ...
def to_int(value: object, name: str, *, minimum: int = 0,
           allow_none: bool = False) -> int | None:
    """An int (not a bool) >= ``minimum``; ``None`` passes when ``allow_none``.

    Raises ValueError naming ``name``, whatever the value's type.
    """
    if value is None and allow_none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        or_none = " or None" if allow_none else ""
        raise ValueError(f"{name} must be an int >= {minimum}{or_none}, got {value!r}")
    return value


@dataclass(frozen=True)
class FieldKind:
    """What a settings field holds, read from its annotation: a duration in seconds (float), a
    count (int), a flag (bool), text (str) or one of some strings (Literal); maybe ``| None``."""

    base: type[float] | type[int] | type[bool] | type[str]
    optional: bool = False
    nonzero: bool = False
    choices: tuple[str, ...] = ()

    def check(self, name: str, value: object) -> Any:
        """``value`` validated (a duration as float seconds); raises TypeError/ValueError."""
        if value is None and self.optional:
            return None
        if self.base is float:
            return to_seconds(value, name, allow_zero=not self.nonzero, allow_none=self.optional)
        if self.base is int:
            return to_int(value, name, minimum=1 if self.nonzero else 0,
                          allow_none=self.optional)
        if self.choices:
            if value not in self.choices:
                raise ValueError(f"{name} must be one of {', '.join(self.choices)}, "
                                 f"got {value!r}")
        elif not isinstance(value, self.base):
            or_none = " or None" if self.optional else ""
            raise TypeError(f"{name} must be a {self.base.__name__}{or_none}, got {value!r}")
        return value


def _field_kind(hint: object, nonzero: bool) -> FieldKind | None:
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        kept = [arg for arg in args if arg is not type(None)]
        if len(kept) != 1:
            return None
        optional, hint = len(kept) < len(args), kept[0]
    if typing.get_origin(hint) is Literal:
        choices = typing.get_args(hint)
        if all(isinstance(choice, str) for choice in choices):
            return FieldKind(str, optional, nonzero, choices)
        return None
    if hint is float or hint is int or hint is bool or hint is str:
        return FieldKind(hint, optional, nonzero)
    return None


_FIELD_KINDS: dict[type, Mapping[str, FieldKind]] = {}


def field_kinds(cls: type) -> Mapping[str, FieldKind]:
    """The fields of dataclass ``cls`` that ``check_fields`` validates, in field order (the
    others, e.g. callables and mappings, are the class's own to check). Read once per class."""
    kinds = _FIELD_KINDS.get(cls)
    if kinds is None:
        hints = typing.get_type_hints(cls)
        found = {}
        for f in dataclasses.fields(cls):
            kind = _field_kind(hints[f.name], bool(f.metadata.get("nonzero")))
            if kind is not None:
                found[f.name] = kind
        kinds = _FIELD_KINDS[cls] = types.MappingProxyType(found)
    return kinds


def check_fields(settings: object) -> None:
    """Validate, in field order, every field of the frozen dataclass instance ``settings`` that
    ``field_kinds`` knows, storing the normalised value (durations become float seconds)."""
    for name, kind in field_kinds(type(settings)).items():
        object.__setattr__(settings, name, kind.check(name, getattr(settings, name)))


def short(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters for a message (a 10 KB name is not echoed whole)."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def check_text(value: object, name: str, *, blank: bool = False, name_like: bool = False) -> str:
    """A str Redis and every terminal can take: not blank (unless ``blank``), valid UTF-8 (no
    lone surrogate, which undecodable bytes leave behind), and with ``name_like`` no control
    character (NUL, newline, escape...). TypeError for a non-str, ValueError otherwise."""
    if isinstance(value, bytes | bytearray):
        raise TypeError(f"{name} must be a str, got bytes {short(repr(value))}: decode it "
                        f"first, e.g. value.decode()")
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {short(repr(value))}")
    if not blank and not value.strip():
        raise ValueError(f"{name} must not be blank")
    try:
        if not value.isascii():  # (ASCII text is valid UTF-8: the common case skips this)
            value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} {short(repr(value))} is not valid text: it holds a lone "
                         f"surrogate (left by undecodable bytes); decode the bytes with an "
                         f"error handler such as 'replace'") from None
    if name_like and not value.isprintable() and any(unicodedata.category(c) == "Cc"
                                                     for c in value):
        raise ValueError(f"{name} {short(repr(value))} must not contain control characters "
                         f"(NUL, newline, escape...)")
    return value


# -- names: the rules a queue name and a workflow id follow, whatever stores them

WORKFLOW_ID_PREFIX = "wf-"
"""Every workflow id starts with it, so ``client.wait`` tells a workflow from a task."""

WORKFLOW_QUEUE_PREFIX = "wf:"
"""Reserved: a workflow is seen (its waits and task events) as the one task of queue
``wf:<id>``, so no queue name may start with it."""

_OWN_LAYOUT_FORBIDDEN = frozenset("{}*")

QUEUE_WILDCARD = "*"
"""In the queues a worker serves, a name holding it is a pattern (``tenant:*``): ``*`` stands
for any run of characters, ``:`` included. ``\\*`` is a literal ``*`` (a queue of Go's layout
named ``star*q`` is served as ``star\\*q``), ``\\\\`` a literal backslash."""

QUEUE_ESCAPE = "\\"


def validate_queue_name(name: object) -> str:
    """Return ``name`` if it is a usable queue name, else raise ValueError saying why. The
    names found good are remembered (a few hundred at most): an app names the same few
    queues on every enqueue.

    These are the rules every layout shares, Go asynq's own (any non-blank text; ``{``, ``}``,
    spaces and ``*`` included); asyncq's own layout adds its stricter ones when a broker
    first uses the queue (``check_own_layout_queue``)."""
    if type(name) is str and name in _GOOD_QUEUE_NAMES:
        return name
    return remember_good(_GOOD_QUEUE_NAMES, _check_queue_name(name))


GOOD_NAMES_MAX = 512  # names a process remembers as checked, per kind (emptied when full)
_GOOD_QUEUE_NAMES: set[str] = set()


def remember_good(good: set[str], name: str) -> str:
    """``name``, just checked, added to the ``good`` names (``GOOD_NAMES_MAX`` at most: the
    set is emptied when full) so the next check of it is a set lookup."""
    if type(name) is str:
        if len(good) >= GOOD_NAMES_MAX:
            good.clear()
        good.add(name)
    return name


def _check_queue_name(name: object) -> str:
    """The rules of a queue name (``validate_queue_name`` without its memory)."""
    return _check_queue_text(name, "queue name")


def check_own_layout_queue(name: str) -> str:
    """``name`` if asyncq's own layout takes it, else ValueError saying why: no ``{``, ``}``,
    whitespace or ``*``. Its names are asyncq's alone (no foreign producer makes them), so
    it keeps the rules that make every name safe there: the name is the queue's Redis Cluster
    hash tag (a name starting with ``}`` would spread the queue's keys over several slots),
    and a ``*`` in a name would read as a pattern where a worker's queues are written. Go
    asynq's layout (``?wire=asynq``) takes every name Go takes."""
    if any(c in _OWN_LAYOUT_FORBIDDEN or c.isspace() for c in name):
        what = "'*'" if QUEUE_WILDCARD in name else "'{', '}' or whitespace"
        why = ("a worker reads it as a pattern: 'tenant:*'); Go asynq's layout "
               "(?wire=asynq) takes it, served as '\\*'" if QUEUE_WILDCARD in name else
               "it is its Redis Cluster hash tag); Go asynq's layout (?wire=asynq) takes it")
        raise ValueError(f"queue name {short(repr(name))} must not contain {what} in "
                         f"asyncq's own layout ({why}")
    return name


def _check_queue_text(name: object, what: str) -> str:
    """The rules a queue name and a queue pattern share."""
    name = check_text(name, what, name_like=True)
    if name.startswith(WORKFLOW_QUEUE_PREFIX):
        raise ValueError(f"{what} {short(repr(name))} must not start with "
                         f"{WORKFLOW_QUEUE_PREFIX!r} (reserved for workflows)")
    return name


def _split_served(spec: str) -> list[str]:
    """``spec`` (a name in a worker's queues) cut at its unescaped ``*``, each part with its
    escapes (``\\*``, ``\\\\``) read; one part when it is no pattern."""
    if QUEUE_ESCAPE not in spec:
        return spec.split(QUEUE_WILDCARD)
    parts, cur, i = [], [], 0
    while i < len(spec):
        c = spec[i]
        if c == QUEUE_ESCAPE and i + 1 < len(spec) and spec[i + 1] in (QUEUE_WILDCARD,
                                                                       QUEUE_ESCAPE):
            cur.append(spec[i + 1])
            i += 2
            continue
        if c == QUEUE_WILDCARD:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def is_queue_pattern(name: str) -> bool:
    """Whether ``name``, among the queues a worker serves, is a pattern (it holds a ``*`` not
    escaped as ``\\*``)."""
    return QUEUE_WILDCARD in name and len(_split_served(name)) > 1


def served_queue_name(spec: str) -> str:
    """The queue a worker's queues entry ``spec`` that is no pattern names: its escapes read
    (``star\\*q`` -> ``star*q``)."""
    return spec if QUEUE_ESCAPE not in spec else _split_served(spec)[0]


def literal_queue_spec(name: str) -> str:
    """How a worker's queues write queue ``name`` literally (``star*q`` -> ``star\\*q``)."""
    return name.replace(QUEUE_ESCAPE, QUEUE_ESCAPE * 2).replace(QUEUE_WILDCARD,
                                                                 QUEUE_ESCAPE + QUEUE_WILDCARD)


def validate_served_queue(name: object) -> str:
    """A name in a worker's ``queues``: a queue name (``\\*`` for a ``*`` in it), or a
    pattern (a queue name with ``*`` in it, each standing for any run of characters, ``:``
    included). ValueError saying why."""
    if isinstance(name, str) and is_queue_pattern(name):
        return _check_queue_text(name, "queue pattern")
    if isinstance(name, str):
        validate_queue_name(served_queue_name(name))
        return name
    return validate_queue_name(name)


def queue_matcher(pattern: str) -> re.Pattern[str]:
    """The regular expression a whole queue name must match to be served by ``pattern``:
    each ``*`` any run of characters (none, or ``:`` among them), the rest literally."""
    return re.compile(".*".join(re.escape(part) for part in _split_served(pattern)), re.DOTALL)


def match_queue_patterns(served: Iterable[str], names: Iterable[str]) -> dict[str, list[str]]:
    """The queues among ``names`` each pattern of ``served`` (a worker's queues, in their
    order) serves, sorted: a name listed in ``served`` itself is served as such, not by a
    pattern; one that several patterns match, by the first of them. Names that are not usable
    queue names are served by none."""
    served = list(served)
    exact = {served_queue_name(q) for q in served if not is_queue_pattern(q)}
    matchers = [(p, queue_matcher(p)) for p in served if is_queue_pattern(p)]
    out: dict[str, list[str]] = {p: [] for p, _ in matchers}
    if not matchers:
        return out
    for name in sorted(set(names) - exact):
        for pattern, matcher in matchers:
            if matcher.fullmatch(name):
                if usable_queue_name(name):
                    out[pattern].append(name)
                break
    return out


def usable_queue_name(name: str) -> bool:
    """Whether ``name`` (read from Redis, e.g. the queue registry) passes
    ``validate_queue_name``."""
    try:
        validate_queue_name(name)
    except (TypeError, ValueError):
        return False
    return True


def workflow_queue(workflow_id: str) -> str:
    """The pseudo-queue of a workflow: its record is read, waited for and reported like the
    task ``workflow_id`` of this queue."""
    return WORKFLOW_QUEUE_PREFIX + workflow_id

"""Fast constructors for the frozen dataclasses built on every enqueue (TaskInfo, the parsed and
resolved options): a frozen dataclass's ``__init__`` sets each field through
``object.__setattr__``, about twice the work of setting its slot directly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import MISSING, fields
from typing import Any, TypeVar

_T = TypeVar("_T")


def slot_builder(cls: type[_T], given: Sequence[str],
                 defaults: dict[str, Any] | None = None) -> Callable[..., _T]:
    """A function taking the fields ``given`` of the slotted dataclass ``cls`` (positionally
    or by name; a name in ``defaults`` may be left out) and returning an instance whose other
    fields hold their defaults, as ``cls(**those)`` would, without ``__init__``. It is written
    out from ``fields(cls)``, so a field added later is set too (one without a default must
    then be in ``given``). No validation: what ``__init__`` does besides setting the fields
    (nothing, for the classes it is used for) is not done."""
    defaults = defaults or {}
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    params = []
    for name in given:
        if name in defaults:
            env[f"given_{name}"] = defaults[name]
            params.append(f"{name}=given_{name}")
        else:
            params.append(name)
    lines = [f"def build({', '.join(params)}):", "    obj = _new(_cls)"]
    for f in fields(cls):  # type: ignore[arg-type]
        env[f"set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.name in given:
            value = f.name
        elif f.default is not MISSING:
            env[f"default_{f.name}"] = f.default
            value = f"default_{f.name}"
        elif f.default_factory is not MISSING:
            env[f"factory_{f.name}"] = f.default_factory
            value = f"factory_{f.name}()"
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default: name it in given")
        lines.append(f"    set_{f.name}(obj, {value})")
    lines.append("    return obj")
    exec("\n".join(lines), env)  # (code written above from the field names alone)
    build: Callable[..., _T] = env["build"]
    return build

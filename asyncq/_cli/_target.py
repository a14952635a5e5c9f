"""Loading what ``asyncq worker TARGET`` runs: ``module:attribute`` naming a ServeMux, a
handler, or a factory that returns one — with a one-line message for each way it goes wrong."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from typing import Any

from .._worker import ServeMux
from ._common import CLIError

HINT = "TARGET is module:attribute, e.g. app.tasks:mux"


class ImportFailed(CLIError):
    """The module of a target raised while it was imported; ``original`` is that error."""

    def __init__(self, message: str, original: BaseException) -> None:
        super().__init__(message)
        self.original = original


def _where(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of ``exc`` outside the import machinery."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "importlib" not in f.filename and not f.filename.startswith("<frozen")]
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    if not frames:
        return "?"
    frame = frames[-1]
    return f"{os.path.relpath(frame.filename)}:{frame.lineno}"


def _cwd_importable() -> None:
    """Modules of the current directory can be imported, as with ``python -m``."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def _import(module_name: str) -> Any:
    _cwd_importable()
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            raise CLIError(f"cannot import {module_name!r}: no module named {missing!r} (run "
                           f"from the directory that contains it; {HINT})") from None
        raise ImportFailed(f"importing {module_name!r} failed: {type(exc).__name__}: {exc} "
                           f"({_where(exc)}); add --traceback to see all", exc) from None
    except Exception as exc:
        raise ImportFailed(f"importing {module_name!r} failed: {type(exc).__name__}: {exc} "
                           f"({_where(exc)}); add --traceback to see all", exc) from None


def _muxes_in(module: Any) -> list[str]:
    return sorted(name for name, value in vars(module).items() if isinstance(value, ServeMux))


def import_target(path: str) -> Any:
    """The object ``path`` names (``module:attr``; ``module.attr`` also accepted)."""
    module_part = path.partition(":")[0]
    if "/" in module_part or "\\" in module_part or module_part.endswith(".py"):
        dotted = module_part.removesuffix(".py").replace("\\", "/").strip("/").replace("/", ".")
        attr = path.partition(":")[2] or "mux"
        raise CLIError(f"{path!r} is a file path; name the module instead: "
                       f"'{dotted}:{attr}' (run from the directory that contains it)")
    module_name, sep, attr = path.partition(":")
    if not sep:
        # "app.tasks" may be a module (the attribute was forgotten) or "module.attr".
        if "." not in path:
            raise CLIError(f"expected module:attribute, got {path!r} ({HINT})")
        _cwd_importable()
        try:
            spec = importlib.util.find_spec(path)
        except ModuleNotFoundError:
            spec = None
        except Exception:  # the parent package raised: report it as an import failure
            _import(path.rpartition(".")[0])
            spec = None
        if spec is not None:
            found = _muxes_in(_import(path))
            suggestion = " or ".join(f"'{path}:{name}'" for name in found) or f"'{path}:mux'"
            raise CLIError(f"{path!r} is a module; name the ServeMux or handler in it: "
                           f"{suggestion}")
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise CLIError(f"expected module:attribute, got {path!r} ({HINT})")
    obj: Any = _import(module_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            found = _muxes_in(_import(module_name))
            hint = f"; it has the ServeMux {', '.join(found)}" if found else ""
            raise CLIError(f"module {module_name!r} has no attribute {attr!r}{hint}") from None
    return obj


async def resolve_handler(target: str, obj: Any, *, factory: bool) -> Any:
    """The handler a target stands for. A ServeMux or handler is used as it is; a callable
    that takes no argument is a factory (with ``factory``, an async one too) and is called;
    anything else is refused before the worker starts."""
    if factory or _is_sync_factory(obj):
        made = obj()
        if inspect.isawaitable(made):
            made = await made
        if not (isinstance(made, ServeMux) or callable(made)):
            raise CLIError(f"{target} was called as a factory and returned {made!r}, not a "
                           f"ServeMux or handler")
        return made
    if isinstance(obj, type) or not callable(obj):
        raise CLIError(f"{target} is neither a ServeMux nor a handler function")
    if inspect.iscoroutinefunction(obj) and not _takes_one_argument(obj):
        raise CLIError(f"{target} is an async function that does not take the task as its "
                       f"argument; a handler is `async def handler(task)` (for an async "
                       f"factory returning a ServeMux, add --factory)")
    return obj


def _takes_one_argument(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind(None)
    except (TypeError, ValueError):
        return False
    return True


def _is_sync_factory(obj: Any) -> bool:
    """A plain function (not a handler object) that can be called without arguments."""
    if not inspect.isfunction(obj) or inspect.iscoroutinefunction(obj):
        return False
    try:
        inspect.signature(obj).bind()
    except TypeError:
        return False
    return True

"""Loading what ``asyncq worker TARGET`` runs: ``module:attribute`` naming a ServeMux, a
handler, a configured Worker, or a factory that returns one (and the WorkerConfig ``--config``
names) — with a one-line message for each way it goes wrong, saying what to pass instead."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from typing import Any

from .._typed._definition import TaskDefinition
from .._worker import ServeMux, Worker, WorkerConfig
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


async def resolve_target(target: str, obj: Any, *, factory: bool) -> Any:
    """What a target stands for: a ServeMux or handler, used as it is; a ``Worker``, run with
    its own handler, settings and Redis connection; or a factory — a plain function without
    arguments (any callable with ``factory``, sync or async) — called for one of those.
    Anything else is refused here, before the worker starts, saying what to pass instead."""
    if isinstance(obj, Worker):
        return obj
    if not isinstance(obj, TaskDefinition) and (factory or _is_sync_factory(obj)):
        made = obj()
        if inspect.isawaitable(made):
            made = await made
        if isinstance(made, Worker):
            return made
        if isinstance(made, WorkerConfig):
            raise CLIError(f"{target} returned a WorkerConfig, which names no handler: pass it "
                           f"as --config {target}, with the ServeMux as TARGET")
        if not (isinstance(made, ServeMux) or callable(made)):
            raise CLIError(f"{target} was called as a factory and returned {made!r}, not a "
                           f"ServeMux, a handler or a Worker")
        check_handler(f"{target} returned {_short(made)}, which", made, target)
        return made
    check_handler(target, obj, target)
    return obj


async def resolve_config(path: str, obj: Any) -> WorkerConfig:
    """The WorkerConfig ``--config`` names: one, or a function without arguments (sync or
    async) returning one."""
    if isinstance(obj, WorkerConfig):
        return obj
    if isinstance(obj, Worker):
        raise CLIError(f"--config {path} is a Worker: pass it as TARGET instead (a Worker has "
                       f"its handler and settings)")
    if not (inspect.isfunction(obj) or inspect.ismethod(obj)) or not _takes_no_argument(obj):
        raise CLIError(f"--config {path} is {_short(obj)}: name a WorkerConfig, or a function "
                       f"without arguments returning one")
    made = obj()
    if inspect.isawaitable(made):
        made = await made
    if not isinstance(made, WorkerConfig):
        raise CLIError(f"--config {path} returned {_short(made)}, not a WorkerConfig")
    return made


def check_handler(what: str, obj: Any, target: str) -> None:
    """Refuse, with what to pass instead, an object the worker could not run tasks with: a
    typed task definition, a WorkerConfig, an ASGI/WSGI web app, a callable that cannot take
    one argument (the task)."""
    if isinstance(obj, ServeMux):
        return
    if isinstance(obj, TaskDefinition):
        muxes = [f"{module}:{name}" for module, name in _muxes_with(obj.name, target, obj.fn)]
        where = (f": {' or '.join(muxes)}" if muxes
                 else " (module:name of the ServeMux whose @mux.task made it)")
        raise CLIError(f"{what} is a task ({obj.name!r}), not a handler: pass the ServeMux "
                       f"it is registered on{where}")
    if isinstance(obj, WorkerConfig):
        raise CLIError(f"{what} is a WorkerConfig, which names no handler: pass it as "
                       f"--config {target}, with the ServeMux as TARGET")
    if isinstance(obj, type) or not callable(obj):
        raise CLIError(f"{what} is neither a ServeMux, a handler, a Worker nor a function "
                       f"returning one ({HINT})")
    kind = web_app_kind(obj)
    if kind is not None:
        found = [f"{module}:{name}" for module, name in _muxes_with(None, target, None)]
        where = f": {' or '.join(found)}" if found else f" ({HINT})"
        article = "an" if kind == "ASGI" else "a"
        raise CLIError(f"{what} is {article} {kind} web app, not a task handler: pass the ServeMux "
                       f"the tasks are registered on{where}")
    if not _takes_one_argument(obj):
        if inspect.iscoroutinefunction(obj) and _takes_no_argument(obj):
            raise CLIError(f"{what} is an async function that does not take the task as its "
                           f"argument; a handler is `async def handler(task)` (for an async "
                           f"factory returning a ServeMux, add --factory)")
        raise CLIError(f"{what} cannot take the task as its one argument (it takes "
                       f"{_params(obj)}); a handler is `async def handler(task)` or "
                       f"`def handler(task)`")


def web_app_kind(obj: Any) -> str | None:
    """"ASGI" or "WSGI" when ``obj`` looks like a web application: called with ``(scope,
    receive, send)`` or ``(environ, start_response)`` (as FastAPI, Starlette, Django and
    Flask apps are), told by its signature and attributes without importing a framework."""
    if callable(getattr(obj, "wsgi_app", None)):  # Flask and the like
        return "WSGI"
    try:
        params = [p for p in inspect.signature(obj).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return None
    names = [p.name for p in params]
    if names[:1] == ["scope"] or (len(params) == 3 and names[1:3] == ["receive", "send"]):
        return "ASGI"
    if names[:1] == ["environ"] or names[1:2] == ["start_response"]:
        return "WSGI"
    return None


def _muxes_with(name: str | None, target: str, fn: Any) -> list[tuple[str, str]]:
    """``(module, attribute)`` of the ServeMux objects in the target's module (and in the
    module defining ``fn``) that have the task ``name`` registered (any ServeMux without
    ``name``)."""
    modules = [_module_of(target)]
    if fn is not None and getattr(fn, "__module__", None) not in modules:
        modules.append(fn.__module__)
    found = []
    for module_name in modules:
        module = sys.modules.get(module_name or "")
        if module is None:
            continue
        for attr in _muxes_in(module):
            if name is None or name in getattr(module, attr).patterns():
                found.append((module_name, attr))
    return found


def _module_of(target: str) -> str:
    module_name, sep, _ = target.partition(":")
    return module_name if sep else target.rpartition(".")[0]


def _short(obj: Any) -> str:
    """How an object is named in a message: its type and, for a function, its name."""
    text = repr(obj)
    return text if len(text) <= 60 else f"an object of type {type(obj).__name__}"


def _params(fn: Any) -> str:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return "(?)"
    return f"({', '.join(params)})"


def _takes_one_argument(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind(None)
    except TypeError:
        return False
    except ValueError:  # no signature (some builtins): cannot tell, let it run
        return True
    return True


def _takes_no_argument(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind()
    except TypeError:
        return False
    except ValueError:
        return True
    return True


def _is_sync_factory(obj: Any) -> bool:
    """A plain function (not a handler object) that can be called without arguments."""
    if not inspect.isfunction(obj) or inspect.iscoroutinefunction(obj):
        return False
    return _takes_no_argument(obj)

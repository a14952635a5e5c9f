"""One virtualenv per library under ``benchmarks/.venv-peers/<lib>`` (stdlib only).

Each library gets its own venv because their pins conflict: arq needs ``redis<6``, saq's redis
extra ``redis<8`` and taskiq-redis 1.2 ``redis>=8``; Celery brings kombu's own pins. In one shared
venv pip would quietly fall back to an old taskiq-redis (1.0.x, before its duplicate-delivery fix),
which would not be a fair comparison. Every venv also gets ``redis[hiredis]`` (the harness uses it
to count and flush), ``psutil`` (RSS sampling), ``uvloop`` (only used with ``--loop uvloop``) and
``py-spy`` (only used with ``--profile``).

A stamp file records what was installed; a venv is rebuilt only when its requirement list (or,
for asyncq, ``pyproject.toml``) changes, so reruns are quick and offline-friendly.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENVS_DIR = ROOT / "benchmarks" / ".venv-peers"

# Harness dependencies, added to every venv (py-spy only runs with --profile).
_COMMON = ["psutil", "uvloop", "py-spy"]



def _asyncq_extras() -> str:
    """asyncq's extras for its venv: metrics and tracing (ASYNCQ_BENCH_WORKER), plus the one
    that brings asynq's wire format (its protobuf library) once pyproject.toml declares it."""
    extras = ["prometheus", "otel"]
    try:
        declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get(
            "optional-dependencies", {})
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        declared = {}
    extras += sorted(name for name in declared if "asynq" in name)
    return ",".join(extras)


# What each library's venv installs (pip requirement strings). asyncq is installed editable
# from this checkout, so the benchmark always measures the working tree.
REQUIREMENTS: dict[str, list[str]] = {
    "asyncq": ["-e", f"{ROOT}[{_asyncq_extras()}]", "opentelemetry-sdk"],
    "arq": ["arq"],                                   # pulls redis[hiredis]<6
    # saq 0.26.4 imports typing_extensions without declaring it as a dependency.
    "saq": ["saq[redis,hiredis]", "typing-extensions"],  # redis<8
    "streaq": ["streaq", "redis[hiredis]"],           # streaq itself uses coredis
    "taskiq": ["taskiq", "taskiq-redis", "redis[hiredis]"],
    # Celery 5 with its Redis broker (kombu); the thread pool needs no extra.
    "celery": ["celery[redis]>=5,<6", "redis[hiredis]"],
}

# Distributions whose versions are reported for each library's venv.
REPORTED_DISTS: dict[str, list[str]] = {
    "asyncq": ["asyncq", "redis", "hiredis"],
    "asyncq-asynq": ["asyncq", "redis", "hiredis", "protobuf"],
    "arq": ["arq", "redis", "hiredis"],
    "saq": ["saq", "redis", "hiredis"],
    "streaq": ["streaq", "coredis", "anyio"],
    "taskiq": ["taskiq", "taskiq-redis", "redis", "hiredis"],
    "celery": ["celery", "kombu", "redis", "hiredis"],
}

# Variants that run in another library's venv: asyncq's own worker and client on asynq's
# Redis layout (the Redis URL gets ``?wire=asynq``; see adapters/asyncq_asynq_.py).
VENV_OF = {"asyncq-asynq": "asyncq"}
GO_PEER = "asynq-go"  # asynq's Go client and server, built from benchmarks/go (see _go)

# Libraries with a throughput adapter (celery's venv also serves benchmarks/workflow_chord.py),
# then the asynq-wire variant and the Go peer, which run beside asyncq.
_PYTHON_LIBS = [lib for lib in REQUIREMENTS
                if (ROOT / "benchmarks" / "adapters" / f"{lib}_.py").exists()]
LIBRARIES = [*_PYTHON_LIBS[:1], *VENV_OF, GO_PEER, *_PYTHON_LIBS[1:]]


@dataclass
class LibEnv:
    lib: str
    python: Path | None
    error: str | None = None
    driver: list[str] | None = None  # the driver command when it is not a Python module

    @property
    def available(self) -> bool:
        return self.error is None and (self.python is not None or self.driver is not None)

    def driver_command(self) -> list[str]:
        """What runs one scenario: ``python -m benchmarks.driver`` or the Go binary."""
        if self.driver is not None:
            return list(self.driver)
        assert self.python is not None
        return [str(self.python), "-m", "benchmarks.driver"]


def _spec_digest(lib: str) -> str:
    h = hashlib.sha256(json.dumps([REQUIREMENTS[lib], _COMMON]).encode())
    if lib == "asyncq":
        h.update((ROOT / "pyproject.toml").read_bytes())
    return h.hexdigest()[:16]


def _python(path: Path) -> Path:
    return path / "bin" / "python"


def ensure(lib: str, *, log_dir: Path, quiet: bool = False) -> LibEnv:
    """Create or refresh the venv of ``lib``; never raises (errors come back in ``LibEnv``)."""
    path = VENVS_DIR / lib
    stamp = path / ".bench-stamp"
    digest = _spec_digest(lib)
    py = _python(path)
    if py.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return LibEnv(lib, py)
    log = log_dir / f"pip-{lib}.log"
    if not quiet:
        print(f"[setup] installing {lib} into {path.relative_to(ROOT)} (log: {log})", flush=True)
    try:
        if path.exists():
            shutil.rmtree(path)
        venv.EnvBuilder(with_pip=True, clear=True).create(path)
        cmd = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
               *REQUIREMENTS[lib], *_COMMON]
        with log.open("w") as fh:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=900,
                                  env={**os.environ, "PIP_NO_INPUT": "1"}, check=False)
        if proc.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-8:])
            return LibEnv(lib, None, f"pip install failed (exit {proc.returncode}):\n{tail}")
        check = subprocess.run([str(py), "-c", f"import benchmarks.adapters.{lib}_"],
                               cwd=ROOT, capture_output=True, text=True, timeout=120,
                               check=False)
        if check.returncode != 0:
            return LibEnv(lib, None, f"import failed:\n{check.stderr.strip()[-800:]}")
    except (OSError, subprocess.SubprocessError) as exc:
        return LibEnv(lib, None, f"{type(exc).__name__}: {exc}")
    stamp.write_text(digest + "\n")
    return LibEnv(lib, py)


def versions(env: LibEnv) -> dict[str, str]:
    """Versions of the reported distributions inside ``env`` (python included)."""
    if env.python is None:
        return {}
    if env.lib not in REPORTED_DISTS:
        return {}
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {'python': sys.version.split()[0]}\n"
        f"for d in {REPORTED_DISTS[env.lib]!r}:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    try:
        out = subprocess.run([str(env.python), "-c", code], capture_output=True, text=True,
                             timeout=60, check=True).stdout
        result: dict[str, str] = json.loads(out)
        return result
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}


if __name__ == "__main__":  # pragma: no cover - manual helper
    for name in sys.argv[1:] or _PYTHON_LIBS:
        print(ensure(name, log_dir=Path("/tmp")))

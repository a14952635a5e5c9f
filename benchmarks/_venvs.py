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
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENVS_DIR = ROOT / "benchmarks" / ".venv-peers"

# Harness dependencies, added to every venv (py-spy only runs with --profile).
_COMMON = ["psutil", "uvloop", "py-spy"]

# What each library's venv installs (pip requirement strings). asyncq is installed editable
# from this checkout, so the benchmark always measures the working tree.
REQUIREMENTS: dict[str, list[str]] = {
    "asyncq": ["-e", f"{ROOT}[prometheus,otel]", "opentelemetry-sdk"],
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
    "arq": ["arq", "redis", "hiredis"],
    "saq": ["saq", "redis", "hiredis"],
    "streaq": ["streaq", "coredis", "anyio"],
    "taskiq": ["taskiq", "taskiq-redis", "redis", "hiredis"],
    "celery": ["celery", "kombu", "redis", "hiredis"],
}

# Libraries with a throughput adapter (celery's venv also serves benchmarks/workflow_chord.py).
LIBRARIES = [lib for lib in REQUIREMENTS
             if (ROOT / "benchmarks" / "adapters" / f"{lib}_.py").exists()]


@dataclass
class LibEnv:
    lib: str
    python: Path | None
    error: str | None = None


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
    for name in sys.argv[1:] or LIBRARIES:
        print(ensure(name, log_dir=Path("/tmp")))

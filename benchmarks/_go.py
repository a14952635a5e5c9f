"""The Go peer, ``asynq-go``: asynq's own client and server (``github.com/hibiken/asynq``, the
reference implementation asyncq speaks to) built from ``benchmarks/go`` (stdlib only).

``go build`` puts the binary in ``benchmarks/.cache/go/`` (git-ignored) on every run; Go's build
and module caches make that quick after the first time. ``go.sum`` is committed and the build
runs with ``-mod=readonly``, so it uses exactly the pinned modules from the Go module proxy and
never rewrites ``go.mod``. Without a Go toolchain the peer is skipped with a message saying so,
as a Python peer that fails to install is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from benchmarks._venvs import ROOT, LibEnv

LIB = "asynq-go"
GO_DIR = ROOT / "benchmarks" / "go"
CACHE_DIR = ROOT / "benchmarks" / ".cache" / "go"
BINARY = CACHE_DIR / "asynqbench"
MIN_GO = "1.24"  # what asynq v0.26 declares in its go.mod
_WELL_KNOWN = ("/usr/local/go/bin/go", "/usr/lib/go/bin/go", str(Path.home() / "go" / "bin" / "go"))


def find_go() -> str | None:
    """The ``go`` command: on PATH, else in the usual install directories."""
    found = shutil.which("go")
    if found:
        return found
    return next((p for p in _WELL_KNOWN if os.access(p, os.X_OK)), None)


def ensure(*, log_dir: Path, quiet: bool = False) -> LibEnv:
    """Build the Go driver/worker binary; never raises (errors come back in ``LibEnv``)."""
    go = find_go()
    if go is None:
        return LibEnv(LIB, None, f"Go toolchain not found (no `go` on PATH nor in "
                                 f"{', '.join(_WELL_KNOWN)}): the asynq-go peer needs Go >= "
                                 f"{MIN_GO} to build benchmarks/go (https://go.dev/dl/)")
    log = log_dir / "go-build.log"
    if not quiet:
        print(f"[setup] building {LIB} ({GO_DIR.relative_to(ROOT)} -> "
              f"{BINARY.relative_to(ROOT)}; log: {log})", flush=True)
    flags = " ".join([os.environ.get("GOFLAGS", ""), "-mod=readonly", "-buildvcs=false"]).strip()
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        # The cache ignores itself (as .pytest_cache does), whatever the root .gitignore says.
        ignore = CACHE_DIR.parent / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# created by benchmarks/_go.py: build output, never committed\n*\n")
        with log.open("w") as fh:
            proc = subprocess.run([go, "build", "-o", str(BINARY), "."], cwd=GO_DIR, stdout=fh,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env={**os.environ, "GOFLAGS": flags}, timeout=900,
                                  check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return LibEnv(LIB, None, f"go build: {type(exc).__name__}: {exc}")
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-8:])
        return LibEnv(LIB, None, f"go build failed (exit {proc.returncode}):\n{tail}")
    return LibEnv(LIB, None, driver=[str(BINARY), "driver"])


def versions(env: LibEnv) -> dict[str, str]:
    """Go, asynq, go-redis and protobuf versions compiled into the binary."""
    if not env.available:
        return {}
    try:
        out = subprocess.run([str(BINARY), "version"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
        result: dict[str, str] = json.loads(out)
        return result
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}

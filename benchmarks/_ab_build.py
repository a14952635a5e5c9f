"""Each side of an A/B run as its own installed package (stdlib only).

A commit's tree is exported with ``git archive`` into ``benchmarks/.cache/ab/<sha>/src`` and
installed, NOT editable, into a venv next to it with the harness's dependencies, so each side
imports exactly that commit's asyncq whatever the working tree holds. A stamp file keeps the
venv for the next run; a failed or interrupted build is redone from scratch.

The harness (driver, worker, probe, adapters) is the current checkout's for both sides: it is
copied into a temporary directory holding no ``asyncq/``, and run from there, so that neither
the current directory nor ``PYTHONPATH`` can put the working tree's asyncq on ``sys.path``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import venv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache" / "ab"
# What the harness needs beside asyncq (and its own dependencies) in every side's venv.
HARNESS_DEPS = ["redis[hiredis]", "psutil", "uvloop", "protobuf>=4.25"]  # (protobuf: --wire asynq)
REPORTED_DISTS = ["asyncq", "redis", "hiredis", "structlog", "orjson", "anyio", "uvloop",
                  "psutil"]
KEEP_BUILDS = 8  # commits kept built in the cache (least recently used go first)
_HARNESS_FILES = ["__init__.py", "driver.py", "worker.py", "_probe.py"]
_COMPARED_SUFFIXES = {".py", ".lua"}  # installed files checked against the commit's tree


def git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout.strip()


def resolve(ref: str) -> str:
    """The full SHA of the commit ``ref`` names (branch, tag, short SHA, ``HEAD~2``...)."""
    try:
        return git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except RuntimeError:
        raise RuntimeError(f"{ref!r} names no commit of {ROOT}") from None


def clean_env() -> dict[str, str]:
    """This environment without what could point a side's Python at other code."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONUSERBASE"}
    return {k: v for k, v in os.environ.items() if k not in drop}


@dataclass
class Side:
    """One side of the comparison: a commit and the venv it is installed in."""

    name: str  # "A" or "B"
    ref: str
    sha: str
    python: Path
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def short(self) -> str:
        return self.sha[:7]


def _digest(sha: str) -> str:
    spec = [sha, HARNESS_DEPS, list(sys.version_info[:2])]
    return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]


def ensure(name: str, ref: str, sha: str, log_dir: Path) -> Side:
    """The venv of commit ``sha`` in the cache, built when its stamp is missing or stale."""
    base = CACHE / sha
    src, env_dir, stamp = base / "src", base / "venv", base / "stamp"
    python = env_dir / "bin" / "python"
    digest = _digest(sha)
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        print(f"[setup] {name} {sha[:7]}: reusing {base.relative_to(ROOT)}", flush=True)
        stamp.touch()  # last used: prune() keeps the most recent
        return Side(name, ref, sha, python)
    print(f"[setup] {name} {sha[:7]}: building {base.relative_to(ROOT)}", flush=True)
    if base.exists():
        shutil.rmtree(base)
    src.mkdir(parents=True)
    archive = base / "src.tar"
    git("archive", "--format=tar", "-o", str(archive), sha)
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    archive.unlink()
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    log = log_dir / f"pip-{sha[:7]}.log"
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
           str(src), *HARNESS_DEPS]
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=900,
                              env={**clean_env(), "PIP_NO_INPUT": "1"}, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-10:])
        raise RuntimeError(f"pip install of {sha[:7]} failed (exit {proc.returncode}), "
                           f"log {log}:\n{tail}")
    stamp.write_text(digest + "\n")
    return Side(name, ref, sha, python)


def prune(keep: set[str], most: int = KEEP_BUILDS) -> None:
    """Remove the least recently used builds beyond ``most`` (each is some 65 MB)."""
    if not CACHE.is_dir():
        return
    builds = [d for d in CACHE.iterdir() if d.is_dir() and d.name not in keep]

    def used(d: Path) -> float:
        stamp = d / "stamp"
        return stamp.stat().st_mtime if stamp.exists() else 0.0

    builds.sort(key=used, reverse=True)
    for d in builds[max(most - len(keep), 0):]:
        print(f"[setup] removing the old build {d.relative_to(ROOT)}", flush=True)
        shutil.rmtree(d, ignore_errors=True)


_PROBE = """
import importlib.metadata as m, json, sys
import asyncq
out = {"asyncq_file": asyncq.__file__, "python": sys.version.split()[0], "versions": {}}
for d in %r:
    try:
        out["versions"][d] = m.version(d)
    except m.PackageNotFoundError:
        pass
print(json.dumps(out))
"""


def verify(side: Side, harness_root: Path) -> None:
    """Import asyncq the way the harness will (same cwd, same environment) and check that it
    is this side's installed copy, file for file the commit's own; fills ``side.info``."""
    proc = subprocess.run([str(side.python), "-c", _PROBE % (REPORTED_DISTS,)],
                          cwd=harness_root, env=clean_env(), capture_output=True, text=True,
                          timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{side.name}: importing asyncq failed:\n{proc.stderr[-1500:]}")
    info: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    installed = Path(info["asyncq_file"]).parent
    env_dir = side.python.parent.parent
    if not installed.is_relative_to(env_dir):
        raise RuntimeError(f"{side.name}: asyncq imported from {installed}, not from {env_dir}")
    tree = CACHE / side.sha / "src" / "asyncq"
    compared = 0
    differ: list[str] = []
    for path in sorted(tree.rglob("*")):
        if path.suffix not in _COMPARED_SUFFIXES or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(tree)
        other = installed / rel
        compared += 1
        if not other.is_file() or other.read_bytes() != path.read_bytes():
            differ.append(str(rel))
    if differ or not compared:
        raise RuntimeError(f"{side.name}: the installed asyncq is not {side.short}'s: "
                           f"{len(differ)} of {compared} files differ or are missing "
                           f"({', '.join(differ[:5])})")
    subject = git("log", "-1", "--format=%cI%x00%s", side.sha).split("\x00", 1)
    info.update({"ref": side.ref, "sha": side.sha, "commit_date": subject[0],
                 "subject": subject[1] if len(subject) > 1 else "",
                 "files_checked": compared})
    side.info = info


def copy_harness(dest: Path) -> dict[str, Any]:
    """Copy this checkout's harness to ``dest/benchmarks``; its fingerprint and commit."""
    src = ROOT / "benchmarks"
    out = dest / "benchmarks"
    out.mkdir(parents=True)
    for name in _HARNESS_FILES:
        shutil.copy2(src / name, out / name)
    shutil.copytree(src / "adapters", out / "adapters",
                    ignore=shutil.ignore_patterns("__pycache__"))
    h = hashlib.sha256()
    for path in sorted(out.rglob("*.py")):
        h.update(str(path.relative_to(dest)).encode() + b"\0" + path.read_bytes())
    if (dest / "asyncq").exists():  # never: the point of the copy
        raise RuntimeError(f"{dest} holds an asyncq package")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--",
                *(f"benchmarks/{name}" for name in _HARNESS_FILES), "benchmarks/adapters")
    return {"commit": git("rev-parse", "HEAD"), "uncommitted_changes": bool(dirty),
            "sha256": h.hexdigest()[:16], "path": str(dest)}

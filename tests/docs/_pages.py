"""What the docs tests read: the pages, their nav, and the code blocks in them."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
FRAGMENT = "<!-- fragment -->"
INCLUDE = re.compile(r'^--8<-- "([^"]+)"$')
REDIS_URL = "redis://127.0.0.1:6379/0"


def pages() -> list[Path]:
    """Every Markdown page of the site (the hooks' folder is code, not a page)."""
    return sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)


def _nav_files(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [f for item in node for f in _nav_files(item)]
    if isinstance(node, dict):
        return [f for value in node.values() for f in _nav_files(value)]
    return []


def nav() -> list[str]:
    """The files the navigation lists, relative to docs/, in order."""
    import yaml  # installed with the docs toolchain (mkdocs)

    class Loader(yaml.SafeLoader):
        """mkdocs.yml may hold ``!!python/name:`` tags; the nav needs none of them."""

    Loader.add_multi_constructor("tag:yaml.org,2002:python/",
                                 lambda loader, suffix, node: None)
    config = yaml.load(MKDOCS.read_text(encoding="utf-8"), Loader=Loader)
    return _nav_files(config["nav"])


@dataclasses.dataclass(frozen=True)
class Block:
    """A fenced code block: where it is, its language, its text, what stands before it."""

    page: Path
    line: int
    lang: str
    code: str
    fragment: bool

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def includes(self) -> list[str]:
        """The files a block made only of ``--8<--`` lines includes (else empty)."""
        lines = [ln.strip() for ln in self.code.splitlines() if ln.strip()]
        found = [INCLUDE.match(ln) for ln in lines]
        return [m.group(1) for m in found if m] if found and all(found) else []


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page (``` fences, at any indentation)."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)", lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        before = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        out.append(Block(path, i + 1, lang, "\n".join(body) + "\n", before == FRAGMENT))
        i = j + 1
    return out


def python_blocks() -> list[Block]:
    return [b for p in [*pages(), ROOT / "README.md"] for b in blocks(p) if b.lang == "python"]

"""The documentation site: it builds in strict mode, works offline, every page is in the
navigation, the generated reference lists every CLI command and every default, and the
README stays a landing page."""

from __future__ import annotations

import argparse
import dataclasses
import html.parser
import os
import re
import subprocess
import sys
from pathlib import Path

import mkdocs  # noqa: F401  (the dev extra installs the docs toolchain: a missing one fails here)
import pytest

import asyncq
from asyncq import _defaults

from ._pages import DOCS, ROOT, nav, pages

README_MAX_LINES = 500
EXTERNAL = re.compile(r"^\s*['\"]?\s*(https?:)?//", re.IGNORECASE)  # another host, any scheme
#: Attributes whose value a browser fetches or follows.
URL_ATTRS = {"href", "src", "srcset", "action", "poster", "data", "formaction", "content",
             "style", "data-src", "data-md-src"}


def _hooks() -> object:
    sys.path.insert(0, str(DOCS / "_hooks"))
    try:
        import asyncq_docs
    finally:
        sys.path.remove(str(DOCS / "_hooks"))
    return asyncq_docs


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as `make docs` builds it (strict: any warning fails)."""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


def test_every_page_is_in_the_navigation_and_every_nav_entry_exists() -> None:
    listed = nav()
    assert len(listed) == len(set(listed)), "a page is listed twice"
    files = {p.relative_to(DOCS).as_posix() for p in pages()}
    assert sorted(files - set(listed)) == [], "pages missing from the nav in mkdocs.yml"
    assert sorted(set(listed) - files) == [], "nav entries without a page"


def test_the_site_is_organised_by_what_the_reader_is_doing() -> None:
    listed = nav()
    for needed in ("tutorial.md", "how-to/deploy.md", "how-to/redis.md",
                   "how-to/observability.md", "how-to/limits.md", "how-to/workflows.md",
                   "how-to/periodic-tasks.md", "how-to/testing.md", "how-to/migrate-celery.md",
                   "how-to/migrate-arq.md", "how-to/migrate-asynq.md", "reference/cli.md",
                   "reference/configuration.md", "reference/delivery-guarantees.md",
                   "reference/data-model.md", "reference/events.md", "architecture.md",
                   "explanation/performance.md"):
        assert needed in listed, needed


def test_the_readme_is_a_landing_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    for section in ("## Install", "## Quickstart", "## asyncq and its peers", "## Performance",
                    "## Documentation"):
        assert section in readme, section
    quick = readme[readme.index("## Quickstart"):readme.index("\n## ",
                                                             readme.index("## Quickstart") + 1)]
    assert len(quick.splitlines()) <= 30
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_the_cli_reference_lists_every_command() -> None:
    hooks = _hooks()
    text = hooks.cli_markdown()  # type: ignore[attr-defined]
    commands = hooks.commands()  # type: ignore[attr-defined]
    names = {c.name for c in commands}
    assert {"asyncq worker", "asyncq task enqueue", "asyncq queue archive-limits",
            "asyncq workflow cancel", "asyncq web", "asyncq metrics", "asyncq dash"} <= names
    for cmd in commands:
        assert re.search(rf"^#+ `{re.escape(cmd.name)}`$", text, re.M), cmd.name
        for action in cmd.parser._actions:
            if action.help == argparse.SUPPRESS:  # an old spelling, refused with its new name
                continue
            for flag in action.option_strings:
                assert flag in text, (cmd.name, flag)


def test_the_configuration_reference_lists_every_default() -> None:
    text = _hooks().defaults_markdown()  # type: ignore[attr-defined]
    names = [n for n in vars(_defaults) if n.isupper()]
    assert len(names) >= 40
    for name in names:
        assert f"| `{name}` |" in text, name
    fields = {f.name for f in dataclasses.fields(asyncq.WorkerConfig)}
    config_page = (DOCS / "reference" / "configuration.md").read_text(encoding="utf-8")
    for field in fields:
        assert f"`{field}`" in config_page or f"`WorkerConfig.{field}`" in text, field


class _Refs(html.parser.HTMLParser):
    """Every URL a page would fetch or follow: attributes and CSS ``url(...)``."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        for name, value in attrs:
            if value and (name in URL_ATTRS or name.startswith("data-")):
                self.urls += [value] if name != "style" else re.findall(r"url\(([^)]*)\)",
                                                                          value)

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls += re.findall(r"url\(([^)]*)\)", data)


def test_the_site_works_offline(site: Path) -> None:
    """No page fetches or links anything from another host: no CDN font, script or style."""
    found: list[str] = []
    pages_seen = 0
    for page in site.rglob("*.html"):
        pages_seen += 1
        refs = _Refs()
        refs.feed(page.read_text(encoding="utf-8"))
        found += [f"{page.relative_to(site)}: {u}" for u in refs.urls if EXTERNAL.search(u)]
        for script in re.findall(r"<script[^>]*>(.*?)</script>", page.read_text("utf-8"), re.S):
            found += [f"{page.relative_to(site)}: script {m}"
                      for m in re.findall(r"https?://[^\s\"']+", script)]
    for css in site.rglob("*.css"):
        found += [f"{css.relative_to(site)}: {u}"
                  for u in re.findall(r"url\(([^)]*)\)", css.read_text("utf-8"))
                  if EXTERNAL.search(u)]
    assert pages_seen >= 40
    assert found == []


def test_the_built_site_has_the_generated_and_included_content(site: Path) -> None:
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "asyncq task enqueue" in cli and "--max-retry" in cli
    config = (site / "reference" / "configuration.html").read_text(encoding="utf-8")
    assert "WORKER_LEASE_DURATION" in config
    tutorial = (site / "tutorial.html").read_text(encoding="utf-8")
    assert "invoice:render" in tutorial and "--8&lt;--" not in tutorial
    api = (site / "reference" / "api" / "client.html").read_text(encoding="utf-8")
    assert "enqueue_many" in api and "retry_attempts" in api

"""The wheel a user installs: its metadata page is the README, the extras exist, and it ships
the package's data files but none of the project's own test tooling."""

from __future__ import annotations

import email
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_describes_itself_with_the_readme(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(tmp_path)], check=True, timeout=120)
    [wheel] = tmp_path.glob("asyncq-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        [meta_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_string(zf.read(meta_name).decode("utf-8"))
    assert meta["Description-Content-Type"] == "text/markdown"
    body = meta.get_payload()
    assert isinstance(body, str)
    assert body.strip() == (ROOT / "README.md").read_text(encoding="utf-8").strip()
    assert {"testing", "dev", "fast", "web"} <= set(meta.get_all("Provides-Extra") or [])
    assert "asyncq/py.typed" in names
    assert "asyncq/_broker/lua/dequeue.lua" in names
    assert "asyncq/metrics/alerts.yml" in names  # asyncq metrics --alert-rules prints it
    assert {"asyncq/web/templates/base.html", "asyncq/web/templates/overview.html",
            "asyncq/web/static/app.css", "asyncq/web/static/app.js"} <= set(names)
    assert not [n for n in names if n.startswith("tests/") or "topology" in n]

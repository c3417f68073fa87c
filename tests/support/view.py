"""The gate page's test material: a secret and hostile markup to plant, headless Chromium to look with."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
#: A secret the view process knows (a credential-named variable) and the gate's process did not, so the run
#: folders hold it as written: only the page's redactor stands between it and the page. `&` and `<` too:
#: redaction must come before escaping.
SECRET = "pl&nted<tok>-9f3a1c77e2"
SECRET_VAR = "VIEW_PLANTED_TOKEN"
HOSTILE = ('<script>alert(1)</script> <img src=x onerror=alert(2)> <a href="javascript:alert(3)">x</a> '
           '<style>body{display:none}</style>')
ARTIFACTS = REPO / "tests" / ".artifacts"  # gitignored; a dot folder is no test package


def plant(policy: Path) -> None:
    """The simulated agent's final words carry the hostile markup and the secret, on both sides."""
    data = yaml.safe_load(policy.read_text(encoding="utf-8"))
    for side in ("with_rule", "without_rule"):
        for step in data[side]:
            if "say" in step:
                step["say"] = f"{step['say']} {HOSTILE} token {SECRET}"
    policy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def require_chromium() -> str:
    """Headless Chromium from the distribution (`apt-get install -y chromium`; .ci/run installs it).
    Missing, the browser tests skip, or fail under REPLAYBOOK_REQUIRE_BROWSER=1 (CI)."""
    path = find_chromium()
    if path is None:
        message = "no chromium on PATH: apt-get install -y chromium"
        if os.environ.get("REPLAYBOOK_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def browse(chromium: str, url: str, *args: str) -> str:
    """Run headless Chromium on ``url`` (a file: URL; no network) and return its stdout."""
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", "--disable-extensions", *args, url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout

"""The gate's page in a real browser (headless Chromium): it renders offline, every anchor the markdown links
resolves, no planted secret or hostile markup survives, and screenshots are kept for a reviewer."""

from __future__ import annotations

import re

import pytest
from support.view import SECRET, SECRET_VAR, browse

from bot.cli.main import run


@pytest.fixture(scope="module")
def page(gate, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv(SECRET_VAR, SECRET)
    mp.chdir(gate.root)
    try:
        code = run(["--root", str(gate.root), "view", str(gate.json), "--out", str(gate.page_dir)])
    finally:
        mp.undo()
    assert code == 0
    return gate.page_dir / "index.html"


def test_every_anchor_the_markdown_links_resolves_in_the_browser(gate, page, chromium):
    report = gate.report.read_text(encoding="utf-8")
    url = page.as_uri()
    targets = re.findall(re.escape(url) + r"#([^)\s]+)\)", report)
    assert len(targets) >= 6, report  # the rule, the decision, the own scenario's rows, the suite's, the cost …
    assert any(t.startswith("scenario-") for t in targets) and any(t.startswith("trial-") for t in targets)
    dom = browse(chromium, url, "--dump-dom")
    ids = set(re.findall(r'\bid="([^"]+)"', dom))
    assert sorted(set(targets) - ids) == []
    trials = [i for i in ids if i.startswith("trial-")]
    assert any("-without-" in i for i in trials) and any("-with-" in i for i in trials)

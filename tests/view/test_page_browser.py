"""The gate's page in a real browser (headless Chromium): it renders offline, every anchor the markdown links
resolves, no planted secret or hostile markup survives, and screenshots are kept for a reviewer."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

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


class _Tags(HTMLParser):
    """Every element and attribute of a document, as the browser left it."""

    def __init__(self):
        super().__init__()
        self.tags: set[str] = set()
        self.styles = 0
        self.urls: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.styles += tag == "style"
        for name, value in attrs:
            if name in ("href", "src", "action", "formaction", "srcset"):
                self.urls.append(value or "")
            if name.startswith("on"):
                self.handlers.append(name)


def test_the_page_shows_hostile_text_as_text_and_never_a_planted_secret(gate, page, chromium):
    runs = "".join(p.read_text(errors="replace") for p in (gate.root / ".replaybook" / "traces").rglob("agent.raw"))
    assert SECRET in runs and "<script>alert(1)</script>" in runs  # the run folders hold both as written
    unknowing = gate.root / "page-without-the-secret"  # a process that does not know the secret shows it: the
    assert run(["--root", str(gate.root), "view", str(gate.json), "--out", str(unknowing)]) == 0  # test can fail
    assert SECRET in html.unescape((unknowing / "index.html").read_text(encoding="utf-8"))
    dom = browse(chromium, page.as_uri(), "--dump-dom")
    raw = page.read_text(encoding="utf-8")
    for text in (dom, raw):
        for form in (SECRET, html.escape(SECRET), html.escape(SECRET, quote=False), "9f3a1c77e2"):
            assert text.count(form) == 0, form
    assert html.escape("<script>alert(1)</script>", quote=False) in dom  # shown, as text
    tags = _Tags()
    tags.feed(dom)
    assert not tags.tags & {"script", "img", "iframe", "object", "embed", "form", "link", "base"}, tags.tags
    assert tags.handlers == [] and tags.styles == 1  # the page's own style sheet, and no planted one
    assert tags.urls and all(u.startswith("#") for u in tags.urls), [u for u in tags.urls if not u.startswith("#")]
    assert "default-src 'none'" in raw and 'http-equiv="Content-Security-Policy"' in raw
    assert tags.tags >= {"details", "summary", "table", "pre"}


def _shot(chromium: str, url: str, png: Path, size: str) -> Path:
    browse(chromium, url, f"--screenshot={png}", f"--window-size={size}")
    assert png.is_file()
    return png


def test_screenshots_of_the_summary_and_of_a_pair_side_by_side(gate, page, chromium, artifacts):
    summary = _shot(chromium, page.as_uri(), artifacts / "gate-page-summary.png", "1400,1300")
    # Headless Chromium paints a page opened at a #fragment blank, so the pair is framed by a page of our own.
    own = next(t for t in re.findall(r'id="(scenario-[^"]+)"', page.read_text()) if "monorepo" in t)
    frame = page.parent / "pair.html"
    frame.write_text(f'<!doctype html><iframe src="index.html#{own}" style="border:0;width:1400px;height:1500px">'
                     "</iframe>", encoding="utf-8")
    pair = _shot(chromium, frame.as_uri(), artifacts / "gate-page-pair.png", "1400,1500")
    for png in (summary, pair):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 60_000, png  # a blank page is ~10 kB
    print(f"\n{summary}\n{pair}")

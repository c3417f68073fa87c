"""`playbook render` material: every host, a repository's render targets, a rendered file's front matter."""

from __future__ import annotations

from pathlib import Path

import yaml
from helpers import write

ALL = ["claude", "agents", "copilot", "cursor", "gemini", "windsurf"]  # every host `render` can write for


def configure(root: Path, targets: list[str], more: str = "") -> None:
    """``root``'s .replaybook.yml: render for ``targets`` (``host`` or ``host:path``), then ``more``."""
    write(root / ".replaybook.yml", "render: [" + ", ".join(f'"{t}"' for t in targets) + "]\n" + more)


def front_matter(data: bytes) -> dict:
    """The YAML front matter a rendered file starts with (it must start with one)."""
    text = data.decode()
    assert text.startswith("---\n")
    return yaml.safe_load(text[4:text.index("\n---\n", 4)]) or {}

"""Two sinks, in fact: every local write to the playbook, the incidents or a rendered file goes through
``change.apply_local`` (the journal, under the playbook's lock).

The whole local loop (``replaybook demo``: capture, distill, gate, admission past the cap, render) and
the other local writers (``playbook render``, ``retire``, ``escalate --write``, ``init``) run in-process
under a Python audit hook that sees every file the process opens for writing, renames or removes; each
such write under the repository must come from the journal. The one other door is a new incident's
exclusive create (``IncidentStore.add``: ``O_EXCL``, so two captures never clobber one another).
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

import pytest
from helpers import make_scenario, rule_yaml, write

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_watching: list[tuple[Path, list[str]]] = []  # (root, writes seen outside a sink); empty: the hook is idle
ALLOWED = (("bot/change.py", "_apply"), ("bot/change.py", "commit"), ("bot/incident/store.py", "add"))
IGNORED = (".replaybook/",)  # traces, caches, the lock and the journal itself: local state, not the playbook


def _hook(event: str, args: tuple) -> None:
    if not _watching:
        return
    if event == "open":
        path, mode, flags = args
        if not isinstance(path, (str, bytes, os.PathLike)) or not (
                (isinstance(mode, str) and set(mode) & set("wax+")) or (isinstance(flags, int) and flags & _WRITE_FLAGS)):
            return
        paths = [path]
    elif event in ("os.rename", "os.remove", "os.rmdir", "os.truncate", "os.symlink", "os.link"):
        paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
    else:
        return
    root, seen = _watching[-1]
    for raw in paths:
        path = Path(os.fsdecode(raw))
        path = path if path.is_absolute() else Path.cwd() / path
        try:
            rel = path.resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        if rel.startswith(IGNORED) or rel == ".replaybook":
            continue
        stack = traceback.extract_stack()
        if not any(f.filename.replace(os.sep, "/").endswith(mod) and f.name == fn for f in stack for mod, fn in ALLOWED):
            ours = [f"{Path(f.filename).parent.name}/{Path(f.filename).name}:{f.name}" for f in stack
                    if "/bot/" in f.filename.replace(os.sep, "/")]
            seen.append(f"{event} {rel} from " + " > ".join(ours))


sys.addaudithook(_hook)


class Watch:
    def __init__(self, root: Path):
        self.root, self.seen = root.resolve(), []

    def __enter__(self) -> "Watch":
        _watching.append((self.root, self.seen))
        return self

    def __exit__(self, *exc) -> None:
        _watching.pop()


def test_the_hook_sees_a_direct_write_and_lets_the_journal_through(tmp_path):
    from bot.change import Change, apply_local

    with Watch(tmp_path) as watch:
        (tmp_path / "playbook").mkdir()
        (tmp_path / "playbook" / "PLAYBOOK.md").write_text("by hand\n")
        os.replace(tmp_path / "playbook" / "PLAYBOOK.md", tmp_path / "playbook" / "moved.md")
        apply_local(Change({"playbook/rules/rule-0001.yaml": "x\n"}), tmp_path)
    assert [s.split(" from ")[0] for s in watch.seen] == ["open playbook/PLAYBOOK.md", "os.rename playbook/PLAYBOOK.md",
                                                          "os.rename playbook/moved.md"]
    assert (tmp_path / "playbook" / "rules" / "rule-0001.yaml").read_text() == "x\n"


def test_the_whole_local_loop_writes_only_through_the_sinks(cli, tmp_path):
    workspace = tmp_path / "ws"
    with Watch(workspace) as watch:
        result = cli("demo", "--workspace", str(workspace))
    assert result.code == 0, result.err
    # The demo first lays its bundled material out in a new, empty workspace (the scenarios and the config):
    # it is the user's set-up, as a checkout is, and holds no playbook, incident or rendered file.
    material = [s for s in watch.seen if s.endswith("demo_loop.py:build_workspace")]
    assert {s.split()[1].split("/")[0] for s in material} == {"scenarios", ".replaybook.yml"}
    assert not [s for s in watch.seen if s not in material], watch.seen
    assert (workspace / "playbook" / "PLAYBOOK.md").is_file() and list((workspace / "incidents").glob("*.yaml"))


@pytest.fixture
def book_root(root):
    write(root / ".replaybook.yml", "render: [claude, agents]\n")
    make_scenario(root)
    for n in (1, 2):
        write(root / "playbook" / "rules" / f"rule-000{n}.yaml", rule_yaml(f"rule-000{n}"))
    return root


def test_render_retire_escalate_and_init_write_only_through_the_sink(cli, book_root):
    with Watch(book_root) as watch:
        for args in (("playbook", "render", "--section", str(book_root / "README.md")),
                     ("playbook", "retire", "rule-0002", "--reason", "test"),
                     ("playbook", "escalate", "rule-0001", "--write"),
                     ("init", str(book_root), "--actions-sha", "a" * 40)):
            result = cli(*args)
            assert result.code in (0, 1), (args, result.err)
    assert not watch.seen, watch.seen
    assert (book_root / "CLAUDE.md").is_file() and (book_root / "AGENTS.md").is_file()
    assert (book_root / "playbook" / "archive" / "rule-0002.yaml").is_file()


def test_escalate_refuses_a_guard_file_it_cannot_read_and_changes_nothing(cli, book_root):
    settings = book_root / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(b'{"hooks": "\xff\xfe"}')
    result = cli("playbook", "escalate", "rule-0001", "--write")
    assert result.code == 2 and ".claude/settings.json: is not a UTF-8 text file" in result.err
    assert settings.read_bytes() == b'{"hooks": "\xff\xfe"}'

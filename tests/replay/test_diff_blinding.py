"""``diff_excludes`` cannot be blinded: the patch is cut on git's own record boundaries, and a diff read in part
leaves the trial unscored (issue 47 item 3).

Before, the patch was split with ``str.splitlines``, which also breaks at ``\\x1c``, ``\\x85``, ``\\u2028`` and
others: one added line holding ``\\x1cdiff --git `` made the chunk count disagree with git's file list, every
file's patch was blanked, and every ``diff_excludes`` held with the forbidden line in ``diff.patch``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.replay.engine import ReplayOptions, run_trial
from bot.replay.sandbox import harness_git
from bot.replay.sandbox.workspace import Sandbox

NOQA = {"diff_excludes": ["# noqa"]}
PROOF = {"succeeds": {"run": "true"}}


@pytest.fixture
def fixture_repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    return repo


@pytest.mark.parametrize("sep", ["\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x0b", "\x0c"],
                         ids=lambda s: f"U+{ord(s):04X}")
def test_a_line_separator_python_knows_and_git_does_not_hides_no_added_line(fixture_repo, sep):
    with Sandbox(fixture_repo) as sb:
        (sb.root / "a.py").write_text(f"x = 1\ny = 2{sep}diff --git a/b b/b\nimport os  # noqa\n", encoding="utf-8")
        (sb.root / "b.py").write_text("z = 3  # noqa\n")
        diff = sb.diff()
    lines = diff.added_lines()
    assert ("a.py", "import os  # noqa") in lines and ("b.py", "z = 3  # noqa") in lines
    assert ("a.py", f"y = 2{sep}diff --git a/b b/b") in lines  # one line, as git wrote it
    assert [f.path for f in diff.files] == ["a.py", "b.py"]
    assert all(f.patch.startswith(f"diff --git a/{f.path} ") for f in diff.files)


def test_an_added_line_cut_by_a_separator_is_still_searched_whole(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        (sb.root / "a.py").write_text("x = 1\nimport os\x85# noqa\n", encoding="utf-8")
        lines = sb.diff().added_lines()
    assert lines == [("a.py", "import os\x85# noqa")]


def test_the_blinding_line_in_a_trial_fails_diff_excludes(make_scenario, tmp_path):
    write = ("printf 'import os  # noqa\\n\\034diff --git a/x b/x\\n' >> a.py; "
             "printf 'y = 1  # noqa\\n' > b.py")
    loaded = make_scenario(pass_if=[NOQA, PROOF], with_rule=[{"bash": write}, {"say": "done"}],
                           files={"a.py": "x = 1\n"})
    result = run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs"), 0)
    assert result.verdict == "failed", result.reason
    assert [c.check for c in result.failed_checks] == [result.failed_checks[0].check]
    assert "noqa" in result.failed_checks[0].check


def test_a_diff_past_the_cap_leaves_the_trial_unscored(make_scenario, tmp_path):
    # git diffs a file over 1 MiB as binary (core.bigFileThreshold): text files of 900 KB pass the cap
    files = harness_git.PATCH_CAP // 900_000 + 1
    write = (f"for i in $(seq 10 {10 + files}); do yes {'a' * 899} | head -n 1000 > big$i.txt; done; "
             "printf 'y = 1  # noqa\\n' > zz.py")
    loaded = make_scenario(pass_if=[NOQA, PROOF], with_rule=[{"bash": write}, {"say": "done"}],
                           files={"a.py": "x = 1\n"})
    result = run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs"), 0)
    assert result.verdict == "unscored", result.reason
    assert "larger than 8 MiB" in result.reason


def test_a_chunk_count_that_disagrees_with_gits_list_is_never_a_blank_patch():
    with pytest.raises(Exception, match="unscored"):
        harness_git._file_changes([("M", "a.py"), ("A", "b.py")], "diff --git a/a.py b/a.py\n+x\n")

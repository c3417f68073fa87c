"""Scope every host honours: each host's scoped file (front matter, folder), and how the gate must price it."""

from __future__ import annotations

from datetime import date

import pytest
from helpers import rule_yaml, write
from support.render import ALL, configure, front_matter

from bot.playbook import scope
from bot.playbook.render import HOSTS
from bot.playbook.render.sync import GENERATED
from bot.playbook.rule import Rule

TEXT = "When editing the api package, run its tests from packages/api."


def add_rule(root, rule_id, paths):
    write(root / "playbook" / "rules" / f"{rule_id}.yaml",
          rule_yaml(rule_id, text=TEXT) + f"paths: {paths}\n")


def test_each_host_gets_the_rule_in_its_own_scoped_form(cli, seeded):
    configure(seeded, ALL)
    add_rule(seeded, "rule-0002", "['packages/api/**', 'services/web/src/**/*.ts']")
    assert cli("playbook", "render").code == 0
    files = {"claude": ".claude/rules/replaybook-rule-0002.md", "windsurf": ".windsurf/rules/replaybook-rule-0002.md"}
    want = {"claude": {"paths": ["packages/api/**", "services/web/src/**/*.ts"]},
            "windsurf": {"trigger": "glob", "globs": "packages/api/**,services/web/src/**/*.ts"}}
    for host, rel in files.items():
        data = (seeded / rel).read_bytes()
        assert front_matter(data) == want[host], host
        assert b"[rule-0002] " + TEXT.encode() in data and GENERATED.encode() in data
        assert b"rule-0002" not in (seeded / HOSTS[host].main).read_bytes()
    # Copilot and Cursor have no dependable scoped form for agents: the rule goes whole into the main file
    for host in ("copilot", "cursor"):
        assert f"[rule-0002] {TEXT}".encode() in (seeded / HOSTS[host].main).read_bytes(), host
        assert not list((seeded / HOSTS[host].scoped_dir).glob("replaybook-rule-0002*")), host
    # Codex and Gemini scope by folder: one nested file per folder, the glob widened to its folder
    for name in ("AGENTS.md", "GEMINI.md"):
        for folder in ("packages/api", "services/web/src"):
            nested = (seeded / folder / name).read_text()
            assert f"for files under `{folder}/`" in nested and f"[rule-0002] {TEXT}" in nested, (folder, name)
        assert "rule-0002" not in (seeded / name).read_text()  # not in the root file every run reads
        assert "[rule-0001]" in (seeded / name).read_text()
    assert cli("playbook", "check").code == 0


def test_a_glob_with_no_folder_stays_whole_in_the_root_file(cli, seeded):
    configure(seeded, ["agents", "gemini"])
    add_rule(seeded, "rule-0002", "['**/*.sql']")
    assert cli("playbook", "render").code == 0
    for name in ("AGENTS.md", "GEMINI.md"):
        assert "[rule-0002]" in (seeded / name).read_text()
    assert not list(seeded.glob("*/**/AGENTS.md"))


def test_nested_sections_go_when_no_rule_needs_them_and_the_users_text_stays(cli, seeded):
    configure(seeded, ["agents"])
    write(seeded / "packages/api/AGENTS.md", "# API notes\n\nUse uv.\n")
    add_rule(seeded, "rule-0002", "['packages/api/**', 'packages/web/**']")
    assert cli("playbook", "render").code == 0
    api = (seeded / "packages/api/AGENTS.md").read_text()
    assert api.startswith("# API notes\n\nUse uv.\n") and "[rule-0002]" in api
    assert "[rule-0002]" in (seeded / "packages/web/AGENTS.md").read_text()
    add_rule(seeded, "rule-0002", "[]")  # global again: into the root file, out of the folders
    assert cli("playbook", "render").code == 0
    assert (seeded / "packages/api/AGENTS.md").read_text() == "# API notes\n\nUse uv.\n"
    assert not (seeded / "packages/web/AGENTS.md").exists()  # it held our section alone
    assert "[rule-0002]" in (seeded / "AGENTS.md").read_text()


def test_a_nested_agents_md_is_held_to_codexs_chain_budget(cli, seeded):
    configure(seeded, ["agents"])
    write(seeded / "packages/api/AGENTS.md", "# API notes\n\n" + "x" * 33_000 + "\n")
    add_rule(seeded, "rule-0002", "['packages/api/**']")
    before = (seeded / "packages/api/AGENTS.md").read_bytes()
    result = cli("playbook", "render")
    assert result.code == 2 and "project_doc_max_bytes" in result.err and "Traceback" not in result.err
    assert (seeded / "packages/api/AGENTS.md").read_bytes() == before


def _rule(paths=(), task_types=()):
    return Rule(id="rule-0009", rule=TEXT, cites=["a"], replay="scenarios/x", created=date(2026, 1, 1),
                paths=list(paths), task_types=list(task_types))


@pytest.mark.parametrize("glob, folder", [("packages/api/**", "packages/api"), ("packages/api/**/*.py", "packages/api"),
                                          ("src/app.py", "src"), ("**/*.sql", None), ("*.md", None),
                                          ("pkg*/x/**", None), ("Makefile", None)])
def test_folder_of(glob, folder):
    assert scope.folder_of(glob) == folder


def test_every_host_has_a_typed_delivery_and_each_agent_a_host():
    assert set(scope.DELIVERY) == set(ALL)
    assert {a: scope.for_agent(a).scoped_by for a in scope.STANDS_FOR} == {
        "claude-code": "read", "builtin": "read", "codex": "start-cwd", "mini-swe-agent": "start-cwd",
        "opencode": "start-cwd"}
    assert scope.DELIVERY["copilot"].scoped_by is None and scope.DELIVERY["cursor"].scoped_by is None
    assert scope.for_agent("command") is None
    assert not scope.priced(_rule(["packages/api/**"]), "opencode").scoped  # its folder files are not checked


def test_the_gate_prices_a_rule_as_its_host_delivers_it():
    rule = _rule(["packages/api/**/*.py"])
    assert scope.priced(rule, "builtin").rule.paths == ["packages/api/**/*.py"]
    assert scope.priced(rule, "codex").rule.paths == ["packages/api/**"]  # widened to its folder
    whole = scope.priced(_rule(["**/*.sql"]), "codex")
    assert not whole.scoped and whole.rule.paths == [] and "priced as global" in whole.reason
    assert not scope.priced(rule, "command").scoped
    typed = scope.priced(_rule(task_types=["api"]), "builtin")  # no host knows a task's type
    assert not typed.scoped and typed.rule.task_types == [] and "no host knows" in typed.reason
    cost = scope.global_cost(rule, "builtin", lambda r: 4.0 if r.paths else 40.0)
    assert (cost.scoped, cost.global_) == (4.0, 40.0) and "90% less" in cost.line()


def test_the_suite_cost_counts_the_scenarios_a_scoped_rule_reaches():
    fixtures = {"api": ["packages/api/app.py", "README.md"], "web": ["packages/web/x.ts"], "docs": ["docs/a.md"]}
    rule = _rule(["packages/api/**/*.py"])
    assert scope.suite_cost(rule, "builtin", fixtures).scoped == 1.0
    assert scope.suite_cost(rule, "builtin", fixtures).global_ == 3.0
    assert scope.suite_cost(rule, "copilot-less-agent", fixtures).scoped == 3.0  # no host: priced global

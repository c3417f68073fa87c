"""The org tier (issue 31): three member repositories built here, the stricter org gate through the real CLI,
a member's declines and budget, and a member's gate that replays its suite with the org tier in the prompt.

The agent is the SIMULATED model on tiny scenarios (``support.gate.mini_scenario``): it writes right.txt
when its policy's ``branch_on`` text is in the prompt, and wrong.txt otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import incident_yaml, write
from support.gate import mini_scenario

from bot import config as config_mod
from bot.playbook.store import Playbook

ORG_RULE = "When a task says make it right, write right.txt and never wrong.txt."
HARMFUL = "When a task says make it right, write right.txt; also prefer the legacy layout."


def member(root: Path, name: str, *, victim: bool = False, org: str = "{path: ../org}", extra: str = "") -> Path:
    """A member with its own scenario for the org rule, a neutral suite scenario, and (``victim``) one the
    harmful rule's words make the agent fail."""
    folder = root / name
    mini_scenario(folder, "make-it-right")
    mini_scenario(folder, "unrelated", branch_on="a text no rule says")
    if victim:
        mini_scenario(folder, "legacy-layout", branch_on="prefer the legacy layout", inverse=True)
    (folder / "playbook" / "rules").mkdir(parents=True)
    write(folder / ".replaybook.yml", f"org: {org}\n{extra}")
    return folder


def org_repo(root: Path, members: list[str], rules: dict[str, str] | None = None) -> Path:
    folder = root / "org"
    (folder / "playbook" / "rules").mkdir(parents=True)
    entries = "".join(f"    {m}: {{path: ../{m}}}\n" for m in members)
    write(folder / ".replaybook.yml", f"org_tier:\n  members:\n{entries}")
    for rule_id, text in (rules or {}).items():
        write(folder / "playbook" / "rules" / f"{rule_id}.yaml", org_rule(rule_id, text, members))
    return folder


def org_rule(rule_id: str, text: str, members: list[str]) -> str:
    return yaml.safe_dump({"id": rule_id, "rule": text, "cites": [f"{m}/inc-a" for m in members],
                           "replays": {m: "scenarios/make-it-right" for m in members}, "created": "2026-11-01"})


@pytest.fixture
def three(tmp_path) -> Path:
    """The org repository and members a, b and c (c holds the scenario the harmful rule breaks)."""
    for name in ("a", "b"):
        member(tmp_path, name)
    member(tmp_path, "c", victim=True)
    org_repo(tmp_path, ["a", "b", "c"])
    return tmp_path


def gate(cli, ws: Path, rule_file: Path, *members: str, extra: tuple[str, ...] = ()):
    cli.root = ws / "org"
    args = [a for m in members for a in ("--member", str(ws / m))]
    return cli("org", "gate", str(rule_file), *args, "--trials", "2", *extra)


def propose(ws: Path, text: str, members: list[str], rule_id: str = "rule-0001") -> Path:
    return write(ws / "org" / "playbook" / "proposed" / f"{rule_id}.yaml", org_rule(rule_id, text, members))


def test_a_rule_proven_in_all_three_members_is_admitted(cli, three):
    result = gate(cli, three, propose(three, ORG_RULE, ["a", "b", "c"]), "a", "b", "c", extra=("--json",))
    assert result.code == 0, result.err
    report = yaml.safe_load(result.out)
    assert report["decision"] == "admit" and report["members"] == ["a", "b", "c"]
    cells = {c["member"]: c for c in report["cells"]}
    for name in "abc":  # discriminative in each member on its own, not only pooled
        assert cells[name]["before"]["passed"] == 0 and cells[name]["after"]["passed"] >= 4, cells[name]
    assert report["k"] == 4  # every member's suite scenarios: a 1, b 1, c 2
    assert report["simulated"] is True


def test_a_rule_that_helps_two_and_regresses_the_third_is_rejected_naming_it(cli, three):
    result = gate(cli, three, propose(three, HARMFUL, ["a", "b", "c"]), "a", "b", "c")
    assert result.code == 1, result.out + result.err
    assert "member c: regressed legacy-layout" in result.err
    table = result.out.split("| | a | b | c |")[1]
    assert "**admit** | **admit** | **reject**" in table, table
    assert "`legacy-layout`" in table


def test_scenarios_from_a_single_member_are_bad_input(cli, three):
    result = gate(cli, three, propose(three, ORG_RULE, ["a"]), "a", "b", "c")
    assert result.code == 2, result.out + result.err
    assert "field `replays`" in result.err and "at least 3 members" in result.err


def test_a_member_scenario_that_links_out_of_the_member_is_refused(cli, three):
    outside = mini_scenario(three / "elsewhere", "make-it-right")
    target = three / "b" / "scenarios" / "linked"
    target.symlink_to(outside)
    path = write(three / "org" / "playbook" / "proposed" / "rule-0001.yaml", yaml.safe_dump({
        "id": "rule-0001", "rule": ORG_RULE, "cites": ["a/x", "b/y"], "created": "2026-11-01",
        "replays": {"a": "scenarios/make-it-right", "b": "scenarios/linked", "c": "scenarios/make-it-right"}}))
    result = gate(cli, three, path, "a", "b", "c")
    assert result.code == 2 and "replays.b" in result.err, result.err


def test_fewer_than_two_members_can_never_be_configured(cli, three):
    result = gate(cli, three, propose(three, ORG_RULE, ["a", "b", "c"]), "a", "b", "c", extra=("--min-members", "1"))
    assert result.code == 2 and "--min-members" in result.err


def test_a_gate_fanned_out_per_member_and_combined_decides_as_one_run(cli, three, tmp_path):
    rule_file = propose(three, HARMFUL, ["a", "b", "c"])
    whole = yaml.safe_load(gate(cli, three, rule_file, "a", "b", "c", extra=("--json",)).out)
    shares = []
    for name in "abc":  # one job per member, each with every member checked out (the correction counts all)
        share = gate(cli, three, rule_file, "a", "b", "c", extra=("--only", name, "--json"))
        assert share.code == 0, share.err  # a share is written, whatever its cell says
        assert yaml.safe_load(share.out)["decision"] in ("partial", "reject")
        shares.append(write(tmp_path / f"share-{name}.json", share.out))
    combined = cli("org", "gate", str(rule_file), *(a for s in shares for a in ("--combine", str(s))), "--json")
    assert combined.code == 1
    got = yaml.safe_load(combined.out)
    for key in ("decision", "reason", "k", "no_effect_admit", "no_effect_regression"):
        assert got[key] == whole[key], key
    assert sorted((c["member"], c["decision"]) for c in got["cells"]) == [("a", "admit"), ("b", "admit"), ("c", "reject")]


@pytest.mark.parametrize("damage", ["twice", "cells", "field", "other-rule"])
def test_damaged_shares_are_bad_input_naming_the_fix(cli, three, tmp_path, damage):
    rule_file = propose(three, ORG_RULE, ["a", "b", "c"])
    doc = yaml.safe_load(gate(cli, three, rule_file, "a", "b", "c", extra=("--only", "a", "--json")).out)
    docs = [doc, doc] if damage == "twice" else [dict(doc, cells="nope") if damage == "cells" else doc]
    if damage == "field":
        docs = [dict(doc, cells=[dict(doc["cells"][0], replays="many")])]
    if damage == "other-rule":
        docs = [dict(doc, rule="rule-0009")]
    paths = [write(tmp_path / f"d{i}.json", json.dumps(d)) for i, d in enumerate(docs)]
    result = cli("org", "gate", str(rule_file), *(a for p in paths for a in ("--combine", str(p))))
    assert result.code == 2, result.err
    assert "--combine" in result.err


# -- a member consumes the tier ---------------------------------------------------------------------------


def test_org_rules_render_first_in_their_own_block_and_a_declined_one_is_not_rendered(cli, tmp_path):
    org_repo(tmp_path, ["a", "b", "c"], {"rule-0001": ORG_RULE, "rule-0002": "When a task is done, say done."})
    member(tmp_path, "a", org="{path: ../org, decline: {rule-0002: 'we say finished, not done'}}")
    cli.root = tmp_path / "a"
    assert cli("playbook", "render").code == 0
    text = (tmp_path / "a" / "playbook" / "PLAYBOOK.md").read_text()
    assert text.index("replaybook:org:start") < text.index("replaybook:org:end") < text.index("No rules yet")
    assert "[org/rule-0001] " + ORG_RULE in text
    assert "say done" not in text  # declined
    assert cli("playbook", "check").code == 0
    report = cli("report").out
    assert "| rule-0002 | declined | we say finished, not done |" in report.replace("  ", " "), report


def test_a_decline_of_an_id_the_tier_lacks_fails_the_check_naming_the_field(cli, tmp_path):
    org_repo(tmp_path, ["a", "b", "c"], {"rule-0001": ORG_RULE})
    member(tmp_path, "a", org="{path: ../org, decline: {rule-0009: no longer}}")
    cli.root = tmp_path / "a"
    cli("playbook", "render")
    result = cli("playbook", "check")
    assert result.code == 1 and "org.decline.rule-0009" in result.out + result.err


def test_org_rules_past_the_budget_are_left_out_and_named(cli, tmp_path):
    rules = {f"rule-{i:04d}": f"When task {i} starts, read file {i} first." for i in range(1, 30)}
    org_repo(tmp_path, ["a", "b", "c"], rules)
    member(tmp_path, "a", org="{path: ../org, budget_bytes: 600}")
    cli.root = tmp_path / "a"
    assert cli("playbook", "render").code == 0
    text = (tmp_path / "a" / "playbook" / "PLAYBOOK.md").read_text()
    block = text[text.index("replaybook:org:start"):text.index("replaybook:org:end")]
    assert len(block.encode()) <= 600 and "[org/rule-0001]" in block and "[org/rule-0029]" not in block
    assert "left out, past the org budget of 600 bytes" in cli("playbook", "check").err


def test_the_default_budget_is_a_quarter_of_the_smallest_target_limit(tmp_path):
    org_repo(tmp_path, ["a", "b", "c"], {"rule-0001": ORG_RULE})
    member(tmp_path, "a", extra="render: [claude, copilot]\n")
    tier = config_mod.org_tier(config_mod.load(tmp_path / "a"))
    assert tier.budget_bytes == 4_000 // 4  # Copilot code review reads the first 4,000 characters


@pytest.mark.parametrize("org, field", [
    ("{path: ../org, repo: acme/playbook, ref: " + "a" * 40 + "}", "org"),
    ("{repo: acme/playbook}", "org"),
    ("{repo: acme/playbook, ref: main}", "org.ref"),
    ("{path: ../org, decline: {rule-0001: ''}}", "org.decline"),
])
def test_a_bad_org_link_is_exit_2_naming_the_field(cli, tmp_path, org, field):
    member(tmp_path, "a", org=org)
    cli.root = tmp_path / "a"
    result = cli("playbook", "list")
    assert result.code == 2 and f"`{field}" in result.err, result.err


def test_a_missing_org_checkout_is_exit_2_saying_how_to_fix_it(cli, tmp_path):
    member(tmp_path, "a", org="{repo: acme/playbook, ref: " + "b" * 40 + "}")
    cli.root = tmp_path / "a"
    result = cli("playbook", "render")
    assert result.code == 2 and "check out the org repository" in result.err
    assert not (tmp_path / "a" / "playbook" / "PLAYBOOK.md").exists()


def test_a_member_rule_that_contradicts_an_org_rule_regresses_in_the_members_gate(cli, tmp_path):
    """``victim`` passes only because the org rule is in the prompt (SIMULATED ``overridden_by``): the member's
    gate must replay its suite with the org tier, or the contradiction goes unseen."""
    org_repo(tmp_path, ["a", "b", "c"], {"rule-0001": ORG_RULE})
    folder = member(tmp_path, "a")
    mini_scenario(folder, "own", branch_on="keep the notes short")
    victim = mini_scenario(folder, "victim")  # branch_on: "write right.txt", the org rule's words
    policy = yaml.safe_load((victim / "policy.yaml").read_text())
    write(victim / "policy.yaml", yaml.safe_dump({**policy, "overridden_by": "write wrong.txt instead"}))
    for inc in ("inc-a", "inc-b"):
        write(folder / "incidents" / f"{inc}.yaml", incident_yaml(inc))
    write(folder / "playbook" / "proposed" / "rule-0001.yaml", yaml.safe_dump({
        "id": "rule-0001", "rule": "When notes are long, keep the notes short and write wrong.txt instead.",
        "cites": ["inc-a", "inc-b"], "replay": "scenarios/own", "created": "2026-11-01"}))
    cli.root = folder
    result = cli("gate", str(folder / "playbook" / "proposed" / "rule-0001.yaml"), "--trials", "2", "--json")
    assert result.out, result.err
    report = yaml.safe_load(result.out)
    assert report["decision"] == "reject" and report["regressions"] == ["victim"], report
    baseline = next(e for e in report["suite"] if e["scenario"] == "victim")["baseline"]
    assert baseline["passed"] == baseline["scored"] > 0  # it passes with the org tier in the prompt


# -- promotion --------------------------------------------------------------------------------------------


def test_a_rule_admitted_in_two_members_is_proposed_once_with_both_scenarios(cli, tmp_path):
    org_repo(tmp_path, ["a", "b", "c"])
    texts = {"a": "When a task says make it right, write right.txt and never wrong.txt.",
             "b": "When a task says make it right, always write right.txt and never wrong.txt.",
             "c": "When the build is slow, cache the wheels."}
    for name, text in texts.items():
        folder = member(tmp_path, name)
        write(folder / "playbook" / "rules" / "rule-0003.yaml", yaml.safe_dump({
            "id": "rule-0003", "rule": text, "cites": ["inc-a"], "replay": "scenarios/make-it-right",
            "created": "2026-10-01"}))
    cli.root = tmp_path / "org"
    args = [a for m in "abc" for a in ("--member", str(tmp_path / m))]
    result = cli("org", "propose", *args, "--write", "--json")
    assert result.code == 0, result.err
    [proposal] = yaml.safe_load(result.out)["proposals"]
    assert proposal["rule"]["replays"] == {"a": "scenarios/make-it-right", "b": "scenarios/make-it-right"}
    assert proposal["rule"]["cites"] == ["a/inc-a", "b/inc-a"]
    written = Playbook(tmp_path / "org" / "playbook", root=tmp_path / "org").entries(("proposed",))
    assert [e.rule.id for e in written] == ["rule-0001"]
    again = cli("org", "propose", *args, "--json")  # already proposed: not again
    assert yaml.safe_load(again.out)["proposals"] == []


def test_the_org_report_shows_each_members_task_types_and_efficiency(cli, three):
    path = three / "c" / "scenarios" / "legacy-layout" / "scenario.yaml"
    write(path, yaml.safe_dump({**yaml.safe_load(path.read_text(encoding="utf-8")), "task_type": "legacy"}))
    result = gate(cli, three, propose(three, HARMFUL, ["a", "b", "c"]), "a", "b", "c")
    assert result.code == 1, result.out + result.err
    rows = {line.split(" | ")[0]: line for line in result.out.splitlines() if line.startswith("| ")}
    assert "| task types" in rows and "| efficiency (SIMULATED)" in rows, result.out
    c_column = rows["| task types"].split(" | ")[3]
    assert "`legacy` 100% → 0% ▼ drops" in c_column, rows["| task types"]
    assert "drops" not in rows["| task types"].split(" | ")[1]  # member a has no such scenario
    assert rows["| efficiency (SIMULATED)"].split(" | ")[3] == "– (the suite's pass rate changed) |"

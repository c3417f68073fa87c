"""Promotion from a workflow (issue 31): ``replaybook org propose --pr`` opens one PR on the org repository.

The org repository is ``octo/app`` on the fake GitHub served over HTTP (real PyGithub); the members are
folders built here, two of them holding twins of one admitted rule.
"""

from __future__ import annotations

import yaml
from helpers import write
from support.gate import mini_scenario


def members_with_twins(tmp_path) -> list[str]:
    (tmp_path / "org" / "playbook" / "rules").mkdir(parents=True)
    write(tmp_path / "org" / ".replaybook.yml",
          "org_tier:\n  members: {a: {path: ../a}, b: {path: ../b}, c: {path: ../c}}\n")
    texts = {"a": "When a task says make it right, write right.txt and never wrong.txt.",
             "b": "When a task says make it right, always write right.txt and never wrong.txt.",
             "c": "When the build is slow, cache the wheels."}
    for name, text in texts.items():
        folder = tmp_path / name
        mini_scenario(folder, "make-it-right")
        write(folder / "playbook" / "rules" / "rule-0003.yaml", yaml.safe_dump({
            "id": "rule-0003", "rule": text, "cites": ["inc-a"], "replay": "scenarios/make-it-right",
            "created": "2026-10-01"}))
    return [a for m in "abc" for a in ("--member", str(tmp_path / m))]


def test_the_twins_are_one_proposal_in_one_pr_and_a_rerun_opens_no_second(cli, gh, event, tmp_path):
    args = members_with_twins(tmp_path)
    cli.root = tmp_path / "org"
    result = cli("org", "propose", *args, "--pr", "--json")
    assert result.code == 0, result.err
    [proposal] = yaml.safe_load(result.out)["proposals"]
    [pr] = gh.pulls
    assert pr["title"] == "Replaybook: rules proposed for the org tier" and "admitted in a, b" in pr["body"]
    files = gh.branch_files(pr["head_ref"])
    written = yaml.safe_load(files["playbook/proposed/rule-0001.yaml"])
    assert written["replays"] == {"a": "scenarios/make-it-right", "b": "scenarios/make-it-right"}
    assert written["rule"] == proposal["rule"]["rule"]
    assert not (tmp_path / "org" / "playbook" / "proposed").exists()  # the checkout is left alone
    again = cli("org", "propose", *args, "--pr")
    assert again.code == 0, again.err
    assert len(gh.pulls) == 1


def test_without_a_token_it_is_bad_input_and_opens_nothing(cli, gh, event, tmp_path, monkeypatch):
    args = members_with_twins(tmp_path)
    monkeypatch.delenv("GITHUB_TOKEN")
    cli.root = tmp_path / "org"
    result = cli("org", "propose", *args, "--pr")
    assert result.code == 2 and "GITHUB_TOKEN" in result.err
    assert gh.pulls == []

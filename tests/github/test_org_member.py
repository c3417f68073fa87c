"""A member of an organisation on GitHub (issue 31): its PR gate, instruction check and replays read the org tier.

Each test builds the org repository (a folder beside the member, ``org: {path: ../org}``) and a member that is a
real git repository (its base on main, then the PR's commit), and runs the real ``PrGate`` through ``execute`` on
the in-memory port. The replays use the SIMULATED agent on tiny scenarios: it writes right.txt only when its
policy's ``branch_on`` text is in the system prompt, so what it does shows what the replay was told.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from helpers import incident_yaml, make_scenario, rule_yaml, write
from support.gate import mini_scenario
from support.github import HEAD, git, run_pr_gate

from bot import config as config_mod
from bot.github.events import GateRulePr
from bot.github.gate import PrGate
from bot.github.handle import execute
from bot.playbook import render as render_mod
from bot.replay.engine import ReplayOptions

ORG_RULE = "When a task says make it right, write right.txt and never wrong.txt."
DECLINED = "When a task is done, say done."


def org_repo(ws: Path) -> Path:
    folder = ws / "org"
    for rule_id, text in (("rule-0101", ORG_RULE), ("rule-0102", DECLINED)):
        write(folder / "playbook" / "rules" / f"{rule_id}.yaml", yaml.safe_dump({
            "id": rule_id, "rule": text, "cites": ["a/inc-a", "b/inc-b", "c/inc-c"],
            "replays": {m: "scenarios/make-it-right" for m in "abc"}, "created": "2026-11-01"}))
    write(folder / ".replaybook.yml", "org_tier:\n  members: {a: {path: ../a}, b: {path: ../b}, c: {path: ../c}}\n")
    return folder


ORG_LINK = "org: {path: ../org, decline: {rule-0102: 'we say finished, not done'}}\n"


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


def rendered_member(ws: Path) -> tuple[Path, str]:
    """Member ``a`` on main: one admitted rule, PLAYBOOK.md and CLAUDE.md rendered with the org tier; its base."""
    org_repo(ws)
    root = ws / "a"
    make_scenario(root)
    for inc, created in (("2026-07-14-0932", "2026-07-14T09:32:00Z"), ("2026-07-21-1105", "2026-07-21T11:05:00Z")):
        write(root / "incidents" / f"{inc}.yaml", incident_yaml(inc, created=created))
    write(root / ".replaybook.yml", ORG_LINK + "render: [claude]\n")
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
    settings = config_mod.load(root)
    book = config_mod.playbook(settings)
    book.render()
    render_mod.render(book, root, settings.config.render)
    git(root, "init", "-q", "-b", "main")
    return root, commit(root, "base")


def test_a_member_that_renders_the_tier_is_not_called_stale(port, tmp_path):
    root, base = rendered_member(tmp_path)
    text = (root / "playbook" / "PLAYBOOK.md").read_text()
    assert "[org/rule-0101] " + ORG_RULE in text and "replaybook:org:start" in (root / "CLAUDE.md").read_text()
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001", last_hit="2026-11-20"))
    settings = config_mod.load(root)
    book = config_mod.playbook(settings)
    book.render()
    render_mod.render(book, root, settings.config.render)
    commit(root, "the PR: a hit recorded, rendered again")
    status, report = run_pr_gate(port, root, HEAD, base)
    assert (status["state"], status["description"]) == ("success", "no rule changed (bookkeeping only)"), report


def test_a_declined_org_rule_is_not_rendered_and_slipping_it_in_fails(port, tmp_path):
    root, base = rendered_member(tmp_path)
    playbook_md = root / "playbook" / "PLAYBOOK.md"
    assert DECLINED not in playbook_md.read_text() and DECLINED not in (root / "CLAUDE.md").read_text()
    text = playbook_md.read_text()
    line = f"- [org/rule-0101] {ORG_RULE}"
    playbook_md.write_text(text.replace(line, line + f"\n- [org/rule-0102] {DECLINED}"))
    commit(root, "the PR: the declined rule, by hand")
    status, report = run_pr_gate(port, root, HEAD, base)
    assert status["state"] == "failure" and "playbook/PLAYBOOK.md" in status["description"], status


def contradicting_pr(ws: Path, org: bool) -> tuple[Path, str, str]:
    """A member whose suite scenario ``victim`` passes only with the org rule's words in the prompt, and whose PR
    adds a rule that contradicts it (SIMULATED ``overridden_by``): (root, base, head)."""
    org_repo(ws)
    root = ws / "a"
    write(root / ".replaybook.yml", ORG_LINK if org else "cap: 60\n")
    (root / "playbook" / "rules").mkdir(parents=True)
    for inc, created in (("inc-a", "2026-07-14T00:00:00Z"), ("inc-b", "2026-07-15T00:00:00Z")):
        write(root / "incidents" / f"{inc}.yaml", incident_yaml(inc, created=created))
    mini_scenario(root, "own", branch_on="keep the notes short")
    victim = mini_scenario(root, "victim")  # branch_on: "write right.txt", the org rule's words
    policy = yaml.safe_load((victim / "policy.yaml").read_text())
    write(victim / "policy.yaml", yaml.safe_dump({**policy, "overridden_by": "write wrong.txt instead"}))
    git(root, "init", "-q", "-b", "main")
    base = commit(root, "base")
    write(root / "playbook" / "rules" / "rule-0001.yaml", yaml.safe_dump({
        "id": "rule-0001", "rule": "When notes are long, keep the notes short and write wrong.txt instead.",
        "cites": ["inc-a", "inc-b"], "task_types": [], "replay": "scenarios/own", "created": "2026-11-01"}))
    return root, base, commit(root, "the rule PR")


def gate_with_replay(port, root: Path, base: str, head: str):
    settings = config_mod.load(root)
    number = port.add_pull(head_ref="replaybook/rule-0001").number
    action = GateRulePr(number=number, head_sha=head, base_ref="main", base_sha=base, fork=False, secrets=True)
    (outcome,) = execute([action], port, root=root, settings=settings,
                         gate=PrGate(root, settings, replay=ReplayOptions()))
    return outcome, "".join(c.body for c in port.comments_on(number))


def test_the_members_github_gate_replays_with_the_org_tier_so_a_contradiction_regresses(port, tmp_path):
    root, base, head = contradicting_pr(tmp_path, org=True)
    outcome, report = gate_with_replay(port, root, base, head)
    assert outcome.verdict == "failure", report
    assert "victim" in report and "regress" in report.lower(), report


def test_without_the_tier_the_same_rule_is_admitted(port, tmp_path):
    """The control: the victim fails without the org rule in its prompt, so the same rule regresses nothing."""
    root, base, head = contradicting_pr(tmp_path, org=False)
    outcome, report = gate_with_replay(port, root, base, head)
    assert outcome.verdict == "success", report


def test_a_pr_that_moves_the_org_pin_fails_saying_so(port, tmp_path):
    root, base = rendered_member(tmp_path)
    write(root / ".replaybook.yml", "org: {repo: acme/playbook, ref: " + "d" * 40 + "}\nrender: [claude]\n")
    commit(root, "the PR: the tier moved to a pin")
    status, report = run_pr_gate(port, root, HEAD, base)
    assert status["state"] == "failure" and "moves the org tier from ../org to acme/playbook" in report and "ddddddd; the gate reads the base" in report, report


def test_the_maintenance_check_holds_a_rendering_with_the_tier_and_re_renders_it_when_stale(port, tmp_path):
    from bot.github.context import RunContext
    from bot.github.events import CheckPlaybookInvariants
    from bot.github.maintenance import check_invariants

    root, base = rendered_member(tmp_path)
    settings = config_mod.load(root)
    (ok,) = check_invariants(CheckPlaybookInvariants(after_sha=port.default_branch_sha()), RunContext(port, root, settings))
    assert ok.status == "unchanged" and "holds every invariant" in ok.summary, ok
    rendered = (root / "playbook" / "PLAYBOOK.md").read_text()
    stripped = rendered[:rendered.index("<!-- replaybook:org:start")] + rendered[rendered.index("-->", rendered.index(
        "replaybook:org:end")) + 3:]
    (root / "playbook" / "PLAYBOOK.md").write_text(stripped)  # as a build without the tier would have left it
    (fix,) = check_invariants(CheckPlaybookInvariants(after_sha=port.default_branch_sha()), RunContext(port, root, settings))
    assert fix.status == "done", fix
    [pr] = port.list_prs("open")
    assert "[org/rule-0101] " + ORG_RULE in port.branches[pr.head_ref].files["playbook/PLAYBOOK.md"]

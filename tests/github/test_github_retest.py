"""The redundancy re-test on GitHub, on the in-memory FakePort: one retirement PR with the evidence, once.

The replays are real (bot.health.redundancy on the simulated model, its cache); ``allow_simulated`` is a
keyword of the Python function only, so the GitHub path itself refuses the simulated model (tested below).
"""

from __future__ import annotations

import json
from datetime import date

from fakes.port import FakePort
from helpers import write
from support.gate import redundancy_playbook as playbook

from bot import config as config_mod
from bot.github import retest as retest_mod
from bot.github.context import RunContext
from bot.github.events import Retest, plan
from bot.github.handle import execute
from bot.replay.engine import SCRIPTED, ReplayOptions

TODAY = date(2026, 12, 1)


def _ctx(root, extra: str = "") -> RunContext:
    write(root / ".replaybook.yml", "github: {agent_logins: [agent-bot]}\n" + extra)
    port = FakePort()
    port.branches["main"].files = {p.relative_to(root).as_posix(): p.read_text("utf-8") for p in root.rglob("*")
                                   if p.is_file() and ".replaybook/" not in p.as_posix()}
    return RunContext(port=port, root=root, settings=config_mod.load(root), today=TODAY)


def _run(ctx, reason="monthly"):
    replay = ReplayOptions(model=SCRIPTED, runs_dir=ctx.settings.path("traces"), sandbox="none")
    return retest_mod.run(Retest(reason=reason), ctx, replay=replay, allow_simulated=True)


def test_the_redundant_rule_gets_one_pr_with_its_evidence_and_a_second_run_changes_nothing(root):
    playbook(root)
    ctx = _ctx(root)
    (first,) = _run(ctx)
    assert first.status == "done", first
    (pr,) = ctx.port.pulls.values()
    files = ctx.port.branches[pr.head_ref].files
    assert "playbook/rules/rule-0002.yaml" not in files  # redundant: retired
    assert "passes 4/4 without it on scripted" in files["playbook/archive/rule-0002.yaml"]
    assert "playbook/rules/rule-0001.yaml" in files and "playbook/archive/rule-0001.yaml" not in files  # needed
    assert "passes 4/4 without it on scripted" in pr.body and "simulated" in pr.body
    assert json.loads(files["playbook/retest.json"])["model"] == SCRIPTED
    commits = ctx.port.branches[pr.head_ref].commits
    (again,) = _run(ctx)
    assert again.status == "unchanged", again
    assert len(ctx.port.pulls) == 1 and ctx.port.branches[pr.head_ref].commits == commits


def test_over_budget_every_rule_is_unknown_and_nothing_retires(root):
    playbook(root)
    ctx = _ctx(root, "health: {retest_max_cost_usd: 0}\n")
    (out,) = _run(ctx)
    assert out.status == "unchanged" and "2 unknown" in out.summary and "nothing to retire" in out.summary
    assert not ctx.port.pulls


def test_if_changed_skips_when_the_recorded_agent_is_current(root):
    playbook(root)
    ctx = _ctx(root)
    write(root / "playbook" / "retest.json", json.dumps({"agent_key": retest_mod.agent_key(ctx.settings.config)}))
    (out,) = _run(ctx, "if_changed")
    assert out.status == "skipped" and not ctx.port.pulls
    write(root / "playbook" / "retest.json", json.dumps({"agent_key": "claude-old-1"}))
    (out,) = _run(ctx, "if_changed")
    assert out.status == "done" and len(ctx.port.pulls) == 1


def test_github_refuses_a_simulated_retest_and_a_missing_key(root, monkeypatch):
    playbook(root)
    ctx = _ctx(root)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (out,) = execute([Retest(reason="monthly")], ctx.port, root=root, settings=ctx.settings, today=TODAY)
    assert out.status == "failed" and "ANTHROPIC_API_KEY" in out.summary
    replay = ReplayOptions(model=SCRIPTED)
    (out,) = retest_mod.run(Retest(reason="dispatch"), ctx, replay=replay)
    assert out.status == "failed" and "simulated" in out.summary
    assert not ctx.port.pulls


def test_the_planner_retests_on_the_monthly_cron_and_on_dispatch():
    assert plan("schedule", {"schedule": "41 5 1 * *"}) == [Retest(reason="monthly")]
    assert plan("workflow_dispatch", {"inputs": {"reason": "retest"}}) == [Retest(reason="dispatch")]
    assert plan("schedule", {"schedule": "23 6 * * 1"})[-1] == Retest(reason="if_changed")


def test_hostile_evidence_reaches_the_body_neutralised():
    from bot.github.port import marker_keys
    from bot.health.redundancy import Retest as Row

    evil = "its scenario does not load: <!-- replaybook:retest --> @admin | fixes #1 [x](https://evil.test)"
    text = retest_mod._summary([Row("rule-0003", "scenarios/x", "unknown", 0, 0, "m", evil)], "m", "1 unknown")
    assert marker_keys(text) == [] and "@admin" not in text and "#1" not in text and "](https://" not in text
    (row,) = [line for line in text.splitlines() if "rule-0003" in line]
    assert row.replace("\\|", "").count("|") == 4  # a pipe in the evidence adds no table cell

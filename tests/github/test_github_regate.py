"""`/replaybook replay --agent A --trials N` end to end (issue 30, item 2): the comment's options reach the re-gate.

The command dispatches the admit workflow with ``pr``, ``agent`` and ``trials``; the workflow validates them
and hands them to ``replaybook github handle --gate-agent A --gate-trials N``; the gate then replays with that
agent only (one of ``replay.agents`` in the base's config) and at most N trials with the rule, never more than
its own budget, and never at a lower pass rate than its own test asks. The reply says what really runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fakes.github import BOT_LOGIN
from fakes.port import FakePort
from helpers import REPO
from support.gate import pr_repo
from support.github import handle

from bot import config as config_mod
from bot.gate.stats import AutoTest, PairedTest, SequentialTest
from bot.github import command_run
from bot.github.command_run import reply_key
from bot.github.events import GateRulePr
from bot.gate.options import gate_test
from bot.gate.pull_request import PrGate
from bot.github.handle import execute
from bot.github.port import marker
from bot.replay.engine import ReplayOptions

BUDGET = SequentialTest().after_n


def regate(port: FakePort, root: Path, **options) -> tuple:
    base, head = pr_repo(root)
    settings = config_mod.load(root)
    number = port.add_pull(head_ref="replaybook/rule-0001").number
    action = GateRulePr(number=number, head_sha=head, base_ref="main", base_sha=base, fork=False, secrets=True)
    (outcome,) = execute([action], port, root=root, settings=settings,
                         gate=PrGate(root, settings, replay=ReplayOptions(), **options))
    [comment] = [c for c in port.comments_on(number) if c.author == port.login]
    return outcome, comment.body


# ------------------------------------------------------------------ the test the gate runs


@pytest.mark.parametrize("trials", range(1, BUDGET + 3))
def test_trials_cap_the_after_side_and_never_lower_its_pass_rate(trials):
    own, test = SequentialTest(), gate_test(trials, "sequential")
    assert test.after_n == min(trials, own.after_n)  # never above the gate's budget
    assert test.after_min_pass <= test.after_n  # a test that can pass
    assert test.after_min_pass / test.after_n >= own.after_min_pass / own.after_n  # never a lower bar
    assert (test.before_n, test.before_max_pass) == (own.before_n, own.before_max_pass)
    assert gate_test(None, "sequential") == own
    # the default, auto: the same sequential test where it applies, the paired test (no trial count) elsewhere
    assert gate_test(trials) == AutoTest(sequential=test, paired=PairedTest()) and gate_test(None) == AutoTest()


def test_the_gate_runs_at_most_the_trials_asked_for(port, root):
    whole, whole_body = regate(port, root)
    fewer, fewer_body = regate(FakePort(), root / "again", trials=2)
    assert whole.verdict == fewer.verdict == "success", (whole, fewer)
    assert "at least 4 of 5 after" in whole_body
    assert "at least 2 of 2 after" in fewer_body and "at most 2 trial(s) with the rule" in fewer_body
    # the same before side (3 trials) and suite; the after side stops at the 2 asked for instead of 4 passes
    assert _replays(whole_body) - _replays(fewer_body) == 2


def test_the_base_configs_paired_test_gates_in_pairs_and_says_trials_do_not_apply(port, root):
    from bot.gate.stats import PairedTest

    (root / ".replaybook.yml").write_text("gate:\n  own_test: paired\n")  # in the base commit
    outcome, body = regate(port, root, trials=2)
    assert outcome.verdict == "success", outcome
    assert "the paired test (`gate.own_test: paired`)" in body and "`--trials 2` does not apply" in body
    wins = next(w for w in range(1, 30) if PairedTest().decide(w, 0, w) == "pass")
    assert _replays(body) - _replays(regate(FakePort(), root / "again", trials=2)[1]) == 2 * wins - (3 + 2)


def _replays(body: str) -> int:
    from bot.github import ledger

    [record] = ledger.read(body, 1)[0]
    return record.replays


def test_the_agent_must_be_one_the_base_config_lists(port, root):
    outcome, body = regate(port, root, agent="codex")  # replay.agents is empty: builtin only
    assert outcome.verdict == "error" and "`codex` is not one of the agents" in body
    ok, ok_body = regate(FakePort(), root / "again", agent="builtin")
    assert ok.verdict == "success" and "agent ` builtin `" in ok_body


@pytest.mark.parametrize("options, problem", [
    ({"agent": "Codex; rm -rf /"}, "--gate-agent"), ({"agent": "a\nb"}, "--gate-agent"),
    ({"trials": 0}, "--gate-trials"), ({"trials": BUDGET + 1}, "--gate-trials"),
])
def test_bad_options_are_bad_input(root, options, problem):
    from bot.errors import BadInput

    with pytest.raises(BadInput, match=problem):
        PrGate(root, config_mod.load(root), replay=ReplayOptions(), **options)


@pytest.mark.parametrize("args", [("--gate-agent", "x y"), ("--gate-trials", "0"), ("--gate-trials", "6"),
                                  ("--gate-trials", "two")])
def test_the_cli_refuses_bad_options_with_exit_2(cli, gh, event, args):
    event("pull_request", {"action": "opened"})
    out = cli("github", "handle", "--json", *args)
    assert out.code == 2, (out.out, out.err)
    assert gh.writes() == []


# ------------------------------------------------------------------ the command dispatches them


def say(gh, event, body: str, *, number: int = 3) -> dict:
    """``maint`` comments ``body`` on PR #``number`` and the event is delivered; the comment."""
    from support.github import REPOSITORY

    gh.add_pull(number)
    comment = gh.add_comment(number, body, user="maint")
    issue = {"number": number, "state": "open", "title": "t", "labels": [],
             "pull_request": {"url": f"https://api.github.com/repos/octo/app/pulls/{number}"}}
    event("issue_comment", {"action": "created", "issue": issue, "repository": REPOSITORY,
                            "sender": {"login": "maint"},
                            "comment": {"id": comment["id"], "body": body, "user": {"login": "maint"}}})
    return comment


def reply(gh, comment) -> str:
    [found] = [c["body"] for c in gh.comments_on(comment["issue_number"]) if marker(reply_key(comment["id"])) in c["body"]]
    return found


@pytest.mark.parametrize("line, inputs, says", [
    # the default config: a real model, so `gate.own_test: auto` gates in pairs, and a trial count does not apply
    ("/replaybook replay", {"pr": "3"}, "agent ` builtin `, the paired test (`gate.own_test: auto`, for a real model): "
                                        "at most 30 pairs of trials without and with the rule"),
    ("/replaybook replay --trials 2", {"pr": "3", "trials": "2"}, "pairs of trials without and with the rule, so "
                                                                  "`--trials 2` does not apply"),
    ("/replaybook replay --agent builtin --trials 99", {"pr": "3", "agent": "builtin", "trials": str(BUDGET)},
     f"`--trials 99` is over the gate's budget of {BUDGET}"),
])
def test_a_maintainers_replay_dispatches_its_options_and_says_what_runs(cli, gh, event, line, inputs, says):
    gh.set_role("maint", "maintain")
    comment = say(gh, event, line)
    out = handle(cli)
    assert out["code"] == 0, out
    assert gh.dispatches == [{"workflow": "replaybook-admit.yml", "ref": "main", "inputs": inputs}]
    text = reply(gh, comment)
    assert says in text and "takes only the PR's number" not in text
    assert [(r["content"], r["user"]) for r in gh.reactions(comment["id"])] == [("eyes", BOT_LOGIN)]


def test_every_input_the_command_sends_is_one_the_admit_workflow_declares():
    doc = yaml.safe_load((REPO / ".github" / "workflows" / command_run.ADMIT_WORKFLOW).read_text())
    inputs = doc[True]["workflow_dispatch"]["inputs"]  # `on:` reads as true
    assert set(command_run.DISPATCH_INPUTS) == set(inputs) == {"pr", "agent", "trials"}
    assert not inputs["agent"].get("required") and not inputs["trials"].get("required")
    action = yaml.safe_load((REPO / "actions" / "admit" / "action.yml").read_text())
    assert {"agent", "trials"} <= set(action["inputs"])


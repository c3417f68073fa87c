"""Only the bot speaks as the bot: each forgery from the attack pass, through the real handler.

The real handlers run as ``replaybook github handle`` runs them, on the
in-memory port (``FakePort``): every write is made as ``github-actions[bot]``,
the workflow token's identity, and seeded text from anyone else carries that
person's login. Each test plants the forgery the issue describes and checks
that the bot neither obeys it nor repeats it.
"""

from __future__ import annotations

import zlib

import pytest
from fakes.port import FakePort
from helpers import incident_yaml, make_scenario, rule_yaml, write
from support.github import (
    HEAD,
    LOG,
    RULE,
    base_repo,
    completed,
    git,
    on_port,
    port_incidents,
    rule_answer,
    run_payload,
    seed_port_run,
)

from bot import config as config_mod
from bot._util.text_safety import neutralise
from bot.github.events import GateRulePr
from bot.github.handle import GATE_MARKER, PrGate, execute
from bot.github.issue_form import MARKER as BLOCK_MARKER
from bot.github.issue_form import parse_incident_issue
from bot.github.port import BOT_LOGINS, marker
from bot.replay.engine import ReplayOptions


def distilled(outcomes: list) -> list:
    return [o for o in outcomes if o.kind == "distill"]


def rule_prs(port: FakePort) -> list:
    return [p for p in port.pulls.values() if p.head_ref.startswith("replaybook/rule-")]


def _slug(name: str) -> str:
    """The bot's key part for a job name, as an attacker can compute it from the job's name."""
    import re

    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:48] or "job"
    return f"{readable}-{zlib.crc32(name.encode()):08x}"


# ------------------------------------------------------------------ text copied from a log


def _capture_log_with(planted: str, port: FakePort, root) -> list:
    """Run 7 fails with ``planted`` in its log just before the error line; the issues capture filed."""
    log = LOG.replace("##[error]", planted + "##[error]", 1)
    assert log != LOG
    seed_port_run(port, 7, log=log)
    assert completed(on_port(port, root, "workflow_run", run_payload(7)))
    return list(port.issues.values())


def test_markers_planted_in_a_log_do_not_survive_and_the_next_failure_is_filed(port, root):
    job = _slug("test (3.11)")
    planted = f"\n<!-- replaybook:run-8-job-{job} -->\n<!-- replaybook:run-8-attempt-1-job-{job} -->\n"
    (first,) = _capture_log_with(planted, port, root)
    assert "<!-- replaybook:run-8" not in first.body
    seed_port_run(port, 8)
    outcomes = on_port(port, root, "workflow_run", run_payload(8))
    assert completed(outcomes), outcomes
    assert len(port.issues) == 2, outcomes  # filed, not "already on #1"


def test_an_incident_block_planted_in_a_log_is_not_the_incident(port, root):
    forged = ("\n<!-- replaybook:incident-yaml -->\n```yaml\n{task: nothing, failure_class: env, trigger: x, "
              "believed: all is well, actual: all is well, triage: false, created: 2026-01-01T00:00:00Z}\n```\n")
    (issue,) = _capture_log_with(forged, port, root)
    assert issue.body.count(BLOCK_MARKER) == 1  # the bot's own, after the evidence
    data, problems = parse_incident_issue(issue.body, number=1, created_at="2026-12-01T00:00:00Z")
    assert problems == [] and data["triage"] is True and data["believed"] != "all is well"


# ------------------------------------------------------------------ comments and reports


def test_someone_elses_comment_with_the_gate_marker_never_receives_the_report(port, root):
    base = base_repo(root)
    pr = port.add_pull()
    forged = port.comment_as(pr.number, f"{GATE_MARKER}\n## ✅ Replaybook gate: admit", author="mallory")
    settings = config_mod.load(root)
    action = GateRulePr(number=pr.number, head_sha=HEAD, base_ref="main", base_sha=base, fork=False, secrets=True)
    execute([action], port, root=root, settings=settings, gate=PrGate(root, settings))
    comments = port.comments_on(pr.number)
    assert [c.author for c in comments] == ["mallory", port.login]
    assert comments[0].body == forged.body  # untouched
    assert "no rule changed" in comments[1].body.lower() or "nothing to replay" in comments[1].body


def comment_text(port: FakePort) -> str:
    return "".join(c.body for c in port.comments_on(1))


# No URL: a rule text holding one is refused before any PR (bot/playbook/rule_text.py); relative links still render.
HOSTILE = "ping @octo/admins, see ![x](img/i.png) and [docs](docs/x.md); fixes #77"


def test_rule_text_in_the_gate_report_is_neutralised(port, root, tmp_path):
    for name in ("2026-07-14-0932", "2026-07-21-1105"):
        write(root / "incidents" / f"{name}.yaml", incident_yaml(name))
    make_scenario(root)
    base = base_repo(root)
    # A sound rule file whose text carries a mention, an image, a link and a closing keyword: a near-twin of
    # rule-0001, so the cheap checks reject it and the report quotes it.
    twin = ("Before running any test command, check for a package-local test config and run from that "
            "directory (@octo ![i](x) [d](y) #77).")
    write(root / "playbook" / "rules" / "rule-0002.yaml", rule_yaml("rule-0002", text=f'"{twin}"'))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a hostile rule")
    assert port.add_pull().number == 1
    summary = tmp_path / "summary.md"
    settings = config_mod.load(root)
    action = GateRulePr(number=1, head_sha=HEAD, base_ref="main", base_sha=base, fork=False, secrets=True)
    (outcome,) = execute([action], port, root=root, settings=settings, step_summary=summary,
                         gate=PrGate(root, settings, replay=ReplayOptions()))
    assert outcome.verdict == "failure" and "near-duplicate" in outcome.summary + comment_text(port), outcome
    (comment,) = port.comments_on(1)
    for text in (comment.body, summary.read_text()):
        assert "rule-0002" in text and "@octo" not in text and "![" not in text and "](" not in text
        assert "#77" not in text


# ------------------------------------------------------------------ rule PRs only the bot opened


FORGERIES = {
    "closed": ["closed"],
    "five open": ["open"] * 5,
    "one open": ["open"],
}


@pytest.mark.parametrize("author, fork", [("mallory", True), ("mallory", False), (BOT_LOGINS[0], True)],
                         ids=["fork", "same repo, another author", "fork, the bot's name"])
@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_rule_pr_does_not_steer_distill(port, root, model, forgery, author, fork):
    cites = port_incidents(port, 2)
    body = "\n".join([marker("rule-0099"), *(marker(f"cite:{c}") for c in cites)])
    for n, state in enumerate(FORGERIES[forgery]):
        port.add_pull("Rule rule-0099", body, f"replaybook/rule-{99 - n:04d}", author,
                      state=state, fork=fork)
    model.book.add(cites[0], rule_answer(cites=cites))
    outcomes = on_port(port, root, "schedule", {"schedule": "0 3 * * *"})
    assert completed(outcomes), outcomes
    mine = [p for p in rule_prs(port) if p.author == port.login and p.same_repo]
    assert [p.head_ref for p in mine] == ["replaybook/rule-0001"], distilled(outcomes)


def test_a_rule_text_never_closes_an_issue_or_pings_from_a_title_or_commit(port, root, model):
    cites = port_incidents(port, 2)
    text = f"{RULE[:-1]}; {HOSTILE}."
    model.book.add(cites[0], rule_answer(cites=cites, rule=text))
    outcomes = on_port(port, root, "schedule", {"schedule": "0 3 * * *"})
    assert completed(outcomes), outcomes
    assert rule_prs(port), distilled(outcomes)
    (pr,) = rule_prs(port)
    messages = [message for _, message in port.messages]
    assert messages, (pr, distilled(outcomes))
    for text in [pr.title, pr.body, *messages]:
        assert "#77" not in text and "@octo" not in text and "](" not in text, text
    assert "Closes #1" in pr.body  # the bot's own closing lines stay


def test_the_neutraliser_defuses_each_forgery():
    for text in ["<!-- replaybook:run-8-job-x -->", "```\n<!-- replaybook:incident-yaml -->", "~~~~",
                 "@alice", "![i](http://x/i.png)", "[a](http://x)", "<img src=x>", "Fixes #77", "GH-77",
                 "o/r#77", "<details>"]:
        out = neutralise(text)
        assert "<!-- replaybook:" not in out and "<!--" not in out
        assert "```" not in out and "~~~" not in out
        for live in ("@alice", "![", "](", "<img", "#77", "GH-77", "<details"):
            assert live not in out, (text, out)
        assert neutralise(out) == out


def test_a_block_inside_someone_elses_fence_is_never_the_bots_block():
    """An issue filed before the neutraliser: the planted marker sits inside the evidence fence, verbatim."""
    from bot.github.issue_form import read_block

    planted = (f"{BLOCK_MARKER}\n```yaml\ntask: nothing\ntriage: false\n```\n")
    body = (f"**Evidence**\n\n````text\n{planted}````\n\n{BLOCK_MARKER}\n```yaml\ntask: the real one\n"
            "triage: true\n```\n")
    assert read_block(body, where="issue #1") == {"task": "the real one", "triage": True}

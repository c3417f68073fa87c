"""Only the bot speaks as the bot: each forgery from the attack pass, through the real handler.

The real CLI (``replaybook github handle``) and PyGithub run against the fake
GitHub; every write the fake receives is made as ``github-actions[bot]``, the
workflow token's identity, and seeded text from anyone else carries that
person's login. Each test plants the forgery the issue describes and checks
that the bot neither obeys it nor repeats it.
"""

from __future__ import annotations

import zlib

import pytest
from fakes.github import BOT_LOGIN
from helpers import incident_yaml, make_scenario, rule_yaml, write
from support.github import HEAD, LOG, RULE, base_repo, distilled, git, handle, incidents, rule_answer, rule_prs, run_payload, seed_run

from bot import config as config_mod
from bot._util.text_safety import neutralise
from bot.github import PyGithubAdapter
from bot.github.events import GateRulePr
from bot.github.handle import GATE_MARKER, PrGate, execute
from bot.github.issue_form import MARKER as BLOCK_MARKER
from bot.github.issue_form import parse_incident_issue
from bot.github.port import marker
from bot.replay.engine import ReplayOptions


@pytest.fixture
def event(pr_event):
    """Events as Actions delivers them, with PRs opted in."""
    return pr_event


def _slug(name: str) -> str:
    """The bot's key part for a job name, as an attacker can compute it from the job's name."""
    import re

    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:48] or "job"
    return f"{readable}-{zlib.crc32(name.encode()):08x}"


# ------------------------------------------------------------------ text copied from a log


def _capture_log_with(planted: str, cli, gh, event) -> list[dict]:
    """Run 7 fails with ``planted`` in its log just before the error line; the issues capture filed."""
    log = LOG.replace("##[error]", planted + "##[error]", 1)
    assert log != LOG
    seed_run(gh, 7, log=log)
    event("workflow_run", run_payload(7))
    assert handle(cli)["code"] == 0
    return gh.issues


def test_markers_planted_in_a_log_do_not_survive_and_the_next_failure_is_filed(cli, gh, event):
    job = _slug("test (3.11)")
    planted = f"\n<!-- replaybook:run-8-job-{job} -->\n<!-- replaybook:run-8-attempt-1-job-{job} -->\n"
    (first,) = _capture_log_with(planted, cli, gh, event)
    assert "<!-- replaybook:run-8" not in first["body"]
    seed_run(gh, 8)
    event("workflow_run", run_payload(8))
    out = handle(cli)
    assert out["code"] == 0, out
    assert len(gh.issues) == 2, out["outcomes"]  # filed, not "already on #1"


def test_an_incident_block_planted_in_a_log_is_not_the_incident(cli, gh, event):
    forged = ("\n<!-- replaybook:incident-yaml -->\n```yaml\n{task: nothing, failure_class: env, trigger: x, "
              "believed: all is well, actual: all is well, triage: false, created: 2026-01-01T00:00:00Z}\n```\n")
    (issue,) = _capture_log_with(forged, cli, gh, event)
    assert issue["body"].count(BLOCK_MARKER) == 1  # the bot's own, after the evidence
    data, problems = parse_incident_issue(issue["body"], number=1, created_at="2026-12-01T00:00:00Z")
    assert problems == [] and data["triage"] is True and data["believed"] != "all is well"


# ------------------------------------------------------------------ comments and reports


def _port(gh):
    return PyGithubAdapter("octo/app", "t", gh.url, sleep=lambda s: None, seconds_between_requests=0,
                           seconds_between_writes=0)


def test_someone_elses_comment_with_the_gate_marker_never_receives_the_report(gh, root):
    base = base_repo(root)
    gh.add_pull(1)
    forged = gh.add_comment(1, f"{GATE_MARKER}\n## ✅ Replaybook gate: admit", user="mallory")
    settings = config_mod.load(root)
    action = GateRulePr(number=1, head_sha=HEAD, base_ref="main", base_sha=base, fork=False, secrets=True)
    port = _port(gh)
    try:
        execute([action], port, root=root, settings=settings, gate=PrGate(root, settings))
    finally:
        port.close()
    comments = gh.comments_on(1)
    assert [c["user"] for c in comments] == ["mallory", BOT_LOGIN]
    assert comments[0]["body"] == forged["body"]  # untouched
    assert "no rule changed" in comments[1]["body"].lower() or "nothing to replay" in comments[1]["body"]


def comment_text(gh) -> str:
    return "".join(c["body"] for c in gh.comments_on(1))


# No URL: a rule text holding one is refused before any PR (bot/playbook/rule_text.py); relative links still render.
HOSTILE = "ping @octo/admins, see ![x](img/i.png) and [docs](docs/x.md); fixes #77"


def test_rule_text_in_the_gate_report_is_neutralised(gh, root, tmp_path):
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
    gh.add_pull(1)
    summary = tmp_path / "summary.md"
    settings = config_mod.load(root)
    action = GateRulePr(number=1, head_sha=HEAD, base_ref="main", base_sha=base, fork=False, secrets=True)
    port = _port(gh)
    try:
        (outcome,) = execute([action], port, root=root, settings=settings, step_summary=summary,
                             gate=PrGate(root, settings, replay=ReplayOptions()))
    finally:
        port.close()
    assert outcome.verdict == "failure" and "near-duplicate" in outcome.summary + comment_text(gh), outcome
    (comment,) = gh.comments_on(1)
    for text in (comment["body"], summary.read_text()):
        assert "rule-0002" in text and "@octo" not in text and "![" not in text and "](" not in text
        assert "#77" not in text


# ------------------------------------------------------------------ rule PRs only the bot opened


FORGERIES = {
    "closed": ["closed"],
    "five open": ["open"] * 5,
    "one open": ["open"],
}


@pytest.mark.parametrize("author, head_repo", [("mallory", "mallory/app"), ("mallory", None),
                                                (BOT_LOGIN, "mallory/app")],
                         ids=["fork", "same repo, another author", "fork, the bot's name"])
@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_rule_pr_does_not_steer_distill(cli, gh, event, model, forgery, author, head_repo):
    cites = incidents(gh, 2)
    body = "\n".join([marker("rule-0099"), *(marker(f"cite:{c}") for c in cites)])
    for n, state in enumerate(FORGERIES[forgery]):
        gh.add_pull(100 + n, title="Rule rule-0099", body=body, head_ref=f"replaybook/rule-{99 - n:04d}",
                    state=state, user=author, head_repo=head_repo)
    model.book.add(cites[0], rule_answer(cites=cites))
    event("schedule", {"schedule": "0 3 * * *"})
    out = handle(cli)
    assert out["code"] == 0, out
    mine = [p for p in rule_prs(gh) if p["user"] == BOT_LOGIN and p.get("head_repo") is None]
    assert [p["head_ref"] for p in mine] == ["replaybook/rule-0001"], distilled(out)


def test_a_rule_text_never_closes_an_issue_or_pings_from_a_title_or_commit(cli, gh, event, model):
    cites = incidents(gh, 2)
    text = f"{RULE[:-1]}; {HOSTILE}."
    model.book.add(cites[0], rule_answer(cites=cites, rule=text))
    event("schedule", {"schedule": "0 3 * * *"})
    out = handle(cli)
    assert out["code"] == 0, out
    assert rule_prs(gh), distilled(out)
    (pr,) = rule_prs(gh)
    messages = [c["message"] for c in gh.state.git_commits.values()]
    assert messages, (pr, distilled(out))
    for text in [pr["title"], pr["body"], *messages]:
        assert "#77" not in text and "@octo" not in text and "](" not in text, text
    assert "Closes #1" in pr["body"]  # the bot's own closing lines stay


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

"""Playbook health on crafted histories: repeats, ignored rules, worth and the retirement order.

Capture and distill record ``repeat_of`` over the real anthropic SDK against scripted answers.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timezone

from helpers import REPO, incident_yaml, make_scenario, rule_yaml, write

from bot.incident import capture
from bot.incident.store import Incident, IncidentStore
from bot.model.llm import LLM
from bot.playbook import worth as health
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook
from bot.replay.gateway.answers import AnswerBook
from bot.replay.gateway.server import Gateway

TODAY = date(2026, 9, 1)
RULE = "Before running any test command, check for a package-local pytest.ini and run pytest from that directory."


def inc(incident_id: str, day: str, cost: int = 0, repeat_of=None) -> Incident:
    data = {"id": incident_id, "task": "t", "failure_class": "wrong_assumption", "trigger": "CI",
            "believed": "b", "actual": "a", "cost_minutes": cost, "created": f"{day}T09:00:00Z"}
    if repeat_of is not None:
        data["repeat_of"] = repeat_of
    return Incident.model_validate(data)


def rule(rule_id: str, cites: list[str], created: str, last_hit: str | None = None, hits: int | None = None) -> Rule:
    return Rule.model_validate({"id": rule_id, "rule": RULE, "cites": cites, "replay": "scenarios/x",
                                "created": created, "last_hit": last_hit, "hits": hits})


# -- repeats and compliance -------------------------------------------------------------------


def test_an_incident_is_a_repeat_by_its_recorded_link_or_a_rule_admitted_before_it():
    r4 = rule("rule-0004", ["i1", "i2", "late"], "2026-07-10")
    history = [inc("i1", "2026-07-01"), inc("i2", "2026-07-05"),
               inc("late", "2026-07-20"),  # cited by a rule admitted before it happened
               inc("said", "2026-07-21", repeat_of="rule-0004"),
               inc("grouped", "2026-07-22", repeat_of=["i1"]),
               inc("denied", "2026-07-23", repeat_of=[]),  # a person said: no repeat
               inc("fresh", "2026-07-24")]
    links = {i.id: health.repeat_link(i, [r4]) for i in history}
    assert links == {"i1": None, "i2": None, "late": "rule-0004", "said": "rule-0004", "grouped": ["i1"],
                     "denied": None, "fresh": None}
    assert [i.id for i in health.repeats_of(r4, history, [r4])] == ["late", "said"]


def test_a_rule_with_n_repeats_after_admission_is_ignored_and_one_before_does_not_count():
    r4 = rule("rule-0004", ["i1", "i2"], "2026-07-10")
    before = inc("before", "2026-07-09", repeat_of="rule-0004")  # before admission: not the rule's failure
    after = [inc(f"a{n}", f"2026-07-{11 + n}", repeat_of="rule-0004") for n in range(2)]
    [one] = health.rule_health([r4], [before, after[0]], TODAY)
    assert (one.repeats, one.compliance) == (["a0"], "repeated")
    [two] = health.rule_health([r4], [before, *after], TODAY)
    assert (two.repeats, two.compliance) == (["a0", "a1"], "ignored")
    [strict] = health.rule_health([r4], [before, *after], TODAY, ignored_after=3)
    assert strict.compliance == "repeated"
    [clean] = health.rule_health([r4], [before], TODAY)
    assert clean.compliance == "obeyed"


def test_the_repeat_share_per_week():
    history = [inc("w1a", "2026-07-06"), inc("w1b", "2026-07-07", repeat_of=["w1a"]),
               inc("w2a", "2026-07-14"), inc("w2b", "2026-07-15"), inc("w2c", "2026-07-16"),
               inc("w2d", "2026-07-17", repeat_of="rule-0001")]
    weeks = health.weekly_repeat_share(history)
    assert [(w.week, w.incidents, w.repeats) for w in weeks] == [("2026-W28", 2, 1), ("2026-W29", 4, 1)]
    assert [w.share for w in weeks] == [0.5, 0.25]


# -- worth and retirement -----------------------------------------------------------------------


def test_a_two_hour_disaster_outlives_a_five_minute_annoyance_cited_more_recently():
    incidents = [inc("big1", "2026-06-01", 120), inc("big2", "2026-06-02", 120),
                 inc("small1", "2026-06-01", 5), inc("small2", "2026-06-02", 5)]
    big = rule("rule-0001", ["big1", "big2"], "2026-06-10", last_hit="2026-07-03")  # 60 days ago
    small = rule("rule-0002", ["small1", "small2"], "2026-06-10", last_hit="2026-09-01")  # today
    by_id = {i.id: i for i in incidents}
    assert health.worth(big, by_id, TODAY).score == (1 + 240) * 0.25
    assert health.worth(small, by_id, TODAY).score == 11
    assert [r.id for r in health.retirement_order([big, small], incidents, TODAY)] == ["rule-0002", "rule-0001"]
    # by last_hit alone the big one would go first
    assert sorted([big, small], key=Rule.heat)[0].id == "rule-0001"


def test_hits_add_the_cost_prevented_and_provisional_rules_still_retire_first():
    incidents = [inc("a1", "2026-06-01", 10), inc("a2", "2026-06-02", 30), inc("p1", "2026-06-01", 600)]
    by_id = {i.id: i for i in incidents}
    cited = rule("rule-0001", ["a1", "a2"], "2026-06-10", last_hit="2026-09-01", hits=3)
    value = health.worth(cited, by_id, TODAY)
    assert (value.cited_minutes, value.prevented_minutes, value.score) == (40, 60, 101)
    provisional = rule("rule-0002", ["p1"], "2026-06-10", last_hit="2026-09-01", hits=9)
    assert health.worth(provisional, by_id, TODAY).score > value.score
    assert [r.id for r in health.retirement_order([cited, provisional], incidents, TODAY)] == ["rule-0002", "rule-0001"]


def test_admitting_past_the_cap_retires_the_lowest_score(root):
    for name in ("x", "y", "z"):
        make_scenario(root, name)
    write(root / "incidents" / "2026-06-01-0900.yaml", _incident_file(120))
    write(root / "incidents" / "2026-06-02-0900.yaml", _incident_file(120))
    write(root / "incidents" / "2026-06-03-0900.yaml", _incident_file(5))
    write(root / "incidents" / "2026-06-04-0900.yaml", _incident_file(5))
    write(root / "playbook" / "rules" / "rule-0001.yaml",
          rule_yaml("rule-0001", cites=["2026-06-01-0900", "2026-06-02-0900"], scenario="x",
                    created="2026-06-10", last_hit="2026-07-03"))
    write(root / "playbook" / "rules" / "rule-0002.yaml",
          rule_yaml("rule-0002", cites=["2026-06-03-0900", "2026-06-04-0900"], scenario="y",
                    created="2026-06-10", last_hit="2026-08-31"))
    book = Playbook(root / "playbook", root=root, cap=1, incidents=IncidentStore(root / "incidents"))
    assert [r.id for r in book.coldest_over_cap(on=TODAY)] == ["rule-0002"]
    assert [r.id for r in book.retire_over_cap(TODAY)] == ["rule-0002"]
    assert [r.id for r in book.admitted()] == ["rule-0001"]


def _incident_file(cost: int) -> str:
    return ("task: t\nfailure_class: wrong_assumption\ntrigger: CI\nbelieved: b\nactual: a\n"
            f"cost_minutes: {cost}\n")


def test_a_hit_counts_once_a_day(root):
    make_scenario(root, "x")
    write(root / "incidents" / "2026-06-01-0900.yaml", _incident_file(1))
    write(root / "playbook" / "rules" / "rule-0001.yaml",
          rule_yaml("rule-0001", cites=["2026-06-01-0900"], scenario="x", created="2026-06-10"))
    book = Playbook(root / "playbook", root=root, incidents=IncidentStore(root / "incidents"))
    for day in (date(2026, 8, 1), date(2026, 8, 1), date(2026, 8, 2)):
        book.hit("applied [rule-0001]", day)
    [r] = book.admitted()
    assert (r.hits, r.last_hit) == (2, date(2026, 8, 2))


# -- capture and distill record the link ----------------------------------------------------------------


def _llm(book: AnswerBook):
    gateway = Gateway(book)
    return gateway, LLM.connect("simulated", api_key=gateway.token, base_url=gateway.url, simulated=True,
                                max_retries=0, timeout_s=10)


# Grounded in the log (packages/api/tests/test_limits.py is in it), as capture now requires (issue 55).
ANSWER = {"task": "t", "believed": "Tests run from the root with `pytest`",
          "actual": "packages/api/tests/test_limits.py imports api.limits, found only from packages/api",
          "failure_class": "wrong_assumption", "cost_minutes": 20}
NOW = datetime(2026, 8, 1, 9, 0, tzinfo=timezone.utc)


def _evidence():
    return capture.evidence_from_log(REPO / "tests" / "data" / "logs" / "gha_pytest.log")


def test_capture_asks_the_simulated_model_and_keeps_only_an_admitted_rule_older_than_the_incident(tmp_path):
    admitted = [rule("rule-0004", ["i1", "i2"], "2026-07-10"), rule("rule-0009", ["i3", "i4"], "2026-08-01")]
    cases = {"rule-0004": "rule-0004", "rule-0009": None,  # admitted the same day: not before the incident
             "rule-0777": None, "rule-0004; rm -rf /": None, None: None}
    for answer, expected in cases.items():
        book = AnswerBook().add("One failed run", json.dumps({**ANSWER, "repeat_of": answer}))
        gateway, llm = _llm(book)
        with gateway:
            result = capture.capture(_evidence(), IncidentStore(tmp_path / str(answer)), llm, now=NOW, rules=admitted)
        assert result.simulated and result.incident.repeat_of == expected, answer
        assert "rule-0004: Before running any test command" in book.requests[0]["messages"][0]["content"]


def test_distill_records_the_later_incidents_of_a_group_and_leaves_a_persons_answer(root):
    from bot import config
    from bot.distill.plan import distill

    a1, a2, a3 = "2026-07-14-0932", "2026-07-21-1105", "2026-07-28-1000"
    write(root / "incidents" / f"{a1}.yaml", incident_yaml(a1))
    write(root / "incidents" / f"{a2}.yaml", incident_yaml(a2, created="2026-07-21T11:05:00Z"))
    write(root / "incidents" / f"{a3}.yaml", incident_yaml(a3, created="2026-07-28T10:00:00Z", repeat_of="[]"))
    gateway, llm = _llm(AnswerBook())  # no answer: the group fails, its links are still recorded
    with gateway:
        dry = distill(config.load(root), llm, today=TODAY, dry_run=True)
        store = IncidentStore(root / "incidents")
        assert dry.repeats == {a2: [a1]} and store.get(a2).repeat_of is None  # a dry run writes nothing
        report = distill(config.load(root), llm, today=TODAY)
    assert report.repeats == {a2: [a1]}
    assert store.get(a2).repeat_of == [a1]
    assert store.get(a1).repeat_of is None
    assert store.get(a3).repeat_of == []  # a person's "no repeat" stays


def test_playbook_escalate_writes_the_guard_and_keeps_other_settings(cli, root):
    make_scenario(root, "x")
    write(root / "incidents" / "2026-06-01-0900.yaml", _incident_file(1))
    write(root / "playbook" / "rules" / "rule-0001.yaml",
          rule_yaml("rule-0001", cites=["2026-06-01-0900"], scenario="x", created="2026-06-10"))
    write(root / ".claude" / "settings.json", '{"model": "claude-sonnet-6"}\n')
    dry = cli("playbook", "escalate", "rule-0001")
    assert dry.code == 0 and "would write .claude/settings.json" in dry.out
    assert json.loads((root / ".claude" / "settings.json").read_text()) == {"model": "claude-sonnet-6"}
    assert cli("playbook", "escalate", "rule-0001", "--write").code == 0
    settings = json.loads((root / ".claude" / "settings.json").read_text())
    assert settings["model"] == "claude-sonnet-6" and settings["hooks"]["PreToolUse"][0]["matcher"] == "Bash"
    assert (root / ".claude" / "hooks" / "replaybook-guard.py").is_file()
    missing = cli("playbook", "escalate", "rule-0999")
    assert missing.code == 2 and "not an admitted rule" in missing.err

"""Suite baselines kept across admissions that cannot reach a scenario (issue 28 item 5).

With ``GateOptions(scope_reach=True)`` (off by default: AGENTS.md is read whole) a suite scenario is replayed
with the admitted rules that can reach it (``decision.reaches``: its
task type, its fixture's files), so admitting a rule scoped elsewhere leaves that scenario's prompt,
and so its cached baseline, as it was; an unscoped rule changes it.
"""

from __future__ import annotations

import yaml
from helpers import write
from support.gate import book, candidate, gate, mini_scenario, own_reads, setup

from bot.gate import decision
from bot.playbook import rule as rules_mod
from bot.scenario import spec as sc


def _admitted(root, rule_id: str, text: str, **scope) -> None:
    write(root / "playbook" / "rules" / f"{rule_id}.yaml",
          yaml.safe_dump({"id": rule_id, "rule": text, "cites": ["inc-a", "inc-b"], "task_types": [],
                          "replay": "scenarios/own", "created": "2026-11-01", **scope}))


def _api(root):
    folder = mini_scenario(root, "api")
    write(folder / "repo" / "api" / "server.py", "print('api')\n")
    return sc.load(folder)


def _baseline(root, path, loaded) -> str:
    return decision.scoped_prompts(book(root), rules_mod.load(path, named_by_id=False), loaded)[0]


def test_a_rule_scoped_to_web_keeps_an_api_scenarios_baseline_and_an_unscoped_one_does_not(root):
    path, api = setup(root), _api(root)
    before = _baseline(root, path, api)
    _admitted(root, "rule-0002", "When a change touches the web client, run its linter before committing.",
              paths=["web/**"])
    assert _baseline(root, path, api) == before  # the api scenario's prompt, so its cached baseline, is kept
    _admitted(root, "rule-0003", "When a change adds a dependency, pin its version in the lock file.")
    assert _baseline(root, path, api) != before  # an unscoped rule reaches every scenario


def test_a_task_type_scope_is_a_scope_too(root):
    path, api = setup(root), _api(root)
    before = _baseline(root, path, api)
    _admitted(root, "rule-0002", "When a task edits docs, build them before committing.", task_types=["docs"])
    assert _baseline(root, path, api) == before


def test_a_candidate_that_cannot_reach_a_suite_scenario_is_not_replayed_there(root):
    setup(root)
    _api(root)
    path = candidate(root)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**data, "paths": ["web/**", "README.md"]}), encoding="utf-8")
    api = sc.load(root / "scenarios" / "api")
    assert decision.scoped_prompts(book(root), rules_mod.load(path, named_by_id=False), api)[1] is not None  # README.md
    path.write_text(yaml.safe_dump({**data, "paths": ["web/**"]}), encoding="utf-8")
    assert decision.scoped_prompts(book(root), rules_mod.load(path, named_by_id=False), api)[1] is None
    own_reads(root)
    result = gate(root, path, scope_reach=True)
    entry = next(e for e in result.suite if e.scenario == "api")
    # builtin's host (Claude Code) loads it on a read: reach is read from api's baseline trials, which never open a
    # web file (the fixture has none, but a Write of one would fire the trigger too), and the bound is reported
    assert not entry.judged and entry.candidate is None and entry.reach_bound is not None
    assert "not replayed" in entry.note and "read a file the rule's paths match" in entry.note


def test_by_default_the_agents_host_decides_whether_a_scoped_candidate_is_judged_everywhere(root):
    """By default (``scope_reach`` None) the host the agent stands for decides (``bot.replay.host_scope``): builtin
    stands for Claude Code, which loads a web/** rule only when the agent reads a web file, so `api` is skipped
    with its bound; on a whole-file host (AGENTS.md read whole by opencode: ``scope_reach`` False here) a rule
    scoped to web/** is still read by an agent working on the api, and the gate replays it there."""
    from bot.gate.result import GateOptions, scoped
    from bot.replay.engine import ReplayOptions

    assert scoped(GateOptions(replay=ReplayOptions(agent="builtin")))
    assert not scoped(GateOptions(replay=ReplayOptions(agent="opencode")))
    setup(root)
    api = mini_scenario(root, "api", branch_on="zzz no rule says this", inverse=True)  # passes whatever it is told
    write(api / "repo" / "api" / "server.py", "print('api')\n")
    path = candidate(root)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**data, "paths": ["web/**"]}), encoding="utf-8")
    own_reads(root)
    default = next(e for e in gate(root, path).suite if e.scenario == "api")
    assert default.candidate is None and default.reach_bound is not None
    whole = next(e for e in gate(root, path, scope_reach=False).suite if e.scenario == "api")
    assert whole.candidate is not None and whole.candidate.n > 0 and whole.reach_bound is None
    assert all(t.delivered is True for t in whole.candidate.trials)


def test_the_gate_reads_a_kept_baseline_from_the_cache(root):
    """With the whole baseline run (no on-demand shortcut), a scoped admission leaves it all in the cache."""
    from dataclasses import replace

    from bot.gate import stats

    path = setup(root)
    _api(root)
    full = replace(stats.SuiteTest(), on_demand=False)
    first = gate(root, path, suite=full, scope_reach=True)
    assert first.decision == "admit", first.reason
    _admitted(root, "rule-0002", "When a change touches the web client, run its linter before committing.",
              paths=["web/**"])
    second = gate(root, path, suite=full, scope_reach=True)
    api = next(e for e in second.suite if e.scenario == "api")
    assert api.baseline.n == 3 and second.cache_hits >= 3  # suite_trials=3: every baseline trial from the cache
    _admitted(root, "rule-0003", "When a change adds a dependency, pin its version in the lock file.")
    third = gate(root, path, suite=full, scope_reach=True)
    assert third.cache_hits < second.cache_hits  # the unscoped rule changed every prompt: nothing kept


# -- `gate.unreached: once`: a scenario the rule's scope cannot reach is screened, not skipped ----------------------


def _scoped(root):
    import yaml
    from support.gate import candidate, mini_scenario, setup

    setup(root)
    for i in range(3):
        mini_scenario(root, f"other{i}", branch_on="zzz no rule says this", inverse=True)  # passes whatever it is told
    path = candidate(root)
    data = yaml.safe_load(path.read_text())
    data["task_types"] = ["web"]  # the suite's scenarios have no task type: the rule's scope cannot reach them
    path.write_text(yaml.safe_dump(data))
    return path


def test_unreached_once_screens_a_scenario_the_scope_cannot_reach_with_one_trial(root):
    from support.gate import gate

    path = _scoped(root)
    full = gate(root, path, jobs=1, cache_dir=None)
    screened = gate(root, path, jobs=1, cache_dir=None, unreached_once=True)
    assert full.decision == screened.decision == "admit", (full.reason, screened.reason)
    judged = [e for e in screened.suite if e.candidate is not None]
    assert len(judged) == 3 and all(e.candidate.n == 1 for e in judged)  # replayed with the rule, once
    assert all("screened" in e.note for e in judged)
    assert all(e.candidate.n >= 8 for e in full.suite if e.candidate is not None)  # the full test, by default
    assert screened.replays < full.replays - 20


def test_unreached_once_still_catches_a_scenario_the_rule_breaks_outright(root):
    from support.gate import gate, mini_scenario

    path = _scoped(root)
    mini_scenario(root, "victim", inverse=True)  # the rule's words make it fail, whatever its scope says
    result = gate(root, path, jobs=1, cache_dir=None, unreached_once=True)
    assert result.decision == "reject" and [e.scenario for e in result.regressions] == ["victim"]


def test_the_plan_of_a_gate_knows_which_scenarios_are_screened(root):
    from support.gate import book

    from bot.gate import decision as gate_mod
    from bot.replay.engine import ReplayOptions

    path = _scoped(root)
    opts = gate_mod.GateOptions(replay=ReplayOptions(), cache_dir=None, suite_trials=3, jobs=1)
    full = gate_mod.estimate(book(root), path, root / "scenarios", opts)
    screened = gate_mod.estimate(book(root), path, root / "scenarios", gate_mod.GateOptions(
        replay=ReplayOptions(), cache_dir=None, suite_trials=3, jobs=1, unreached_once=True))
    assert screened.replays < full.replays - 20, (screened.replays, full.replays)

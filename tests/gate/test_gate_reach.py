"""Trials keyed by what the agent was given, and reach read from the recorded trace (issue 54 items 2 and 3).

Where the host delivers by scope (``GateOptions.scope_reach``; by default the host's own, ``reach.host_scopes``),
each suite scenario is replayed with the admitted rules whose scope reaches it, and each trial is cached under
those instructions (``trial_key``). A path-scoped candidate is not replayed on a scenario whose baseline trials
never did what makes the host load it (``reach_trigger``: here Claude Code's, reading a matching file), and the
report gives the bound on harm those trials leave. Real scenario folders, the real engine and sandbox, the
simulated model (SIMULATED: scripted answers, no real model).
"""

from __future__ import annotations

import copy
from datetime import date

import pytest
import yaml
from helpers import write
from support.gate import book, candidate, gate, mini_scenario, own_reads, setup

from bot.gate import reach, report
from bot.gate.stats import SequentialTest

GOOD = [{"bash": "echo ok > right.txt"}, {"say": "done"}]


def _scenario(root, sid: str, reads: str, *, files: dict[str, str], inverse: bool = False):
    """A scenario the agent passes whatever it is told (``inverse``: fails when the rule is in its prompt), after
    ``cat``-ing ``reads``. Its fixture holds ``files``."""
    folder = root / "scenarios" / sid
    write(folder / "repo" / "README.md", "fixture\n")
    for rel, text in files.items():
        write(folder / "repo" / rel, text)
    steps = [{"bash": f"cat {reads}"}, *GOOD]
    bad = [{"bash": f"cat {reads}"}, {"bash": "echo no > wrong.txt"}, {"say": "done"}]
    write(folder / "policy.yaml", yaml.safe_dump({
        "branch_on": "write right.txt" if inverse else "zzz no rule says this",
        "with_rule": bad if inverse else steps, "without_rule": copy.deepcopy(steps)}))
    write(folder / "scenario.yaml", yaml.safe_dump({
        "id": sid, "task": "make it right", "repo": "repo",
        "pass_if": [{"succeeds": {"run": "test -f right.txt"}}, {"exists": ["README.md"]}],
        "budget": {"max_turns": 6, "timeout_s": 60, "max_cost_usd": 1.0}}))
    return folder


def _scoped(path, globs):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**data, "paths": globs}), encoding="utf-8")
    return path


def _suite(root, mono: bool = False):
    """`own` (the candidate's), `web` (reads web/app.js), `api` (reads api/server.py, has no web file) and, with
    ``mono``, `mono`: web/app.js is in its fixture, so the fixture alone says a web rule reaches it, but its agent
    only ever reads api/server.py."""
    first = _scoped(setup(root), ["web/**"])
    own_reads(root)
    _scenario(root, "web", "web/app.js", files={"web/app.js": "app\n"})
    _scenario(root, "api", "api/server.py", files={"api/server.py": "srv\n"})
    if mono:
        _scenario(root, "mono", "api/server.py", files={"api/server.py": "srv\n", "web/app.js": "app\n"})
    return first


SCOPED = {"scope_reach": True, "reach_trigger": "read", "jobs": 1, "test": SequentialTest()}


def _entry(result, sid):
    return next(e for e in result.suite if e.scenario == sid)


def _trials(side):
    return [(t.trial, t.verdict, t.duration_s) for t in side.scored]


def test_a_candidate_in_scope_a_replays_no_scenario_of_scope_b_and_b_keeps_its_baselines(root):
    first = _suite(root)
    result = gate(root, first, **SCOPED)
    assert result.decision == "admit", result.reason
    assert result.reason.endswith("were not replayed (harm at most 63.2% each, 95%)"), result.reason
    api, web = _entry(result, "api"), _entry(result, "web")
    assert api.candidate is None and not api.judged  # no trial of `api` with the web rule
    assert api.reach_trials == 3 and api.reach_bound == pytest.approx(1 - 0.05 ** (1 / 3))
    assert all(t.footprint["reads"] == ["api/server.py"] for t in api.baseline.scored)
    assert web.judged and web.candidate.n > 0  # `web` reads web/app.js: the rule reaches it, full test
    kept = _trials(api.baseline)
    book(root).admit(first, date(2026, 11, 2))  # admitted in scope web/**

    mini_scenario(root, "own2", branch_on="keep its server log quiet")
    own_reads(root, "api/server.py", "own2")  # the api rule reaches its own scenario's agent once it opens an api file
    second = _scoped(candidate(root, "rule-0002", text="When an API handler changes, keep its server log quiet.",
                               sid="own2"), ["api/**"])
    after = gate(root, second, **SCOPED)
    assert after.suite, after.reason
    api2 = _entry(after, "api")
    assert _trials(api2.baseline)[:3] == kept  # the very trials: read from the cache, not replayed
    assert api2.judged and api2.candidate.n > 0  # api/** reaches it: judged in full against that baseline
    # the web scenario's instructions did change (the admitted web rule reaches it): its baseline is new
    assert _entry(after, "web").reach_trials == 3


def test_a_whole_file_host_gets_every_rule_everywhere_so_nothing_is_skipped_or_kept(root):
    """`scope_reach: False` is a host that reads one whole file (opencode, Copilot, Cursor: ``reach.host_scopes``):
    the agent gets the rule in its instructions wherever it works, so `api` is judged in full, and its with-rule
    trials really held the rule, though its agent never opens a web file."""
    assert not reach.host_scopes("opencode") and reach.host_scopes("builtin")
    first = _suite(root)
    result = gate(root, first, jobs=1, test=SequentialTest(), scope_reach=False)
    api = _entry(result, "api")
    assert api.candidate is not None and api.candidate.n > 0 and api.reach_bound is None
    assert all(t.delivered is True for t in api.candidate.trials), [t.delivery for t in api.candidate.trials]
    data = report.as_json(result)
    assert data["not_replayed_by_reach"] == [] and all(e["reach"] is None for e in data["suite"])


def test_the_report_states_the_bound_of_each_skipped_scenario(root):
    first = _suite(root)
    _scenario(root, "mono", "api/server.py", files={"api/server.py": "srv\n", "web/app.js": "app\n"})
    result = gate(root, first, suite_trials=20, **SCOPED)
    bound = 1 - 0.05 ** (1 / 20)  # 13.9%: the rule of three says 15%
    data = report.as_json(result)
    # `mono` holds web/app.js, so the fixture alone would replay it: its trace says its agent never reads it
    assert data["not_replayed_by_reach"] == [{"scenario": s, "baseline_trials": 20, "harm_bound95": round(bound, 6)}
                                             for s in ("api", "mono")]
    (row,) = [e for e in data["suite"] if e["scenario"] == "api"]
    assert row["reach"]["harm_bound95"] == round(bound, 6) and row["with_rule"] is None
    text = report.markdown(result, SequentialTest())
    assert "| `api` | 20 | 13.9% |" in text and "| `mono` | 20 | 13.9% |" in text
    assert "harm at most 13.9% (95%, exact)" in text


# Reach is a model of the host, read from a lower bound of what the agent did; where it is wrong, the delivery check
# says so. Here reach is asked for Codex's trigger (a working folder under web/) while the agent is builtin, which
# gets the rule as Claude Code does, on reading web/app.js: `web`'s baselines never ran in web/, so reach says the
# rule cannot reach it, and the with-rule trial gets it all the same.
MISJUDGED = {**SCOPED, "reach_trigger": "cwd"}


def test_a_with_rule_trial_that_got_the_rule_anyway_sends_the_scenario_to_the_full_test(root):
    """The screening trial of `gate.unreached: once`: the delivery check says it got the rule (by builtin's read
    trigger), where the baselines said the host would not give it, so reach is not trusted there."""
    first = _suite(root)
    result = gate(root, first, unreached_once=True, **MISJUDGED)
    web = _entry(result, "web")
    assert web.reach_bound is None and web.judged and web.candidate.n > 1
    assert "got the rule" in web.note and web.candidate.trials[0].delivered is True
    assert _entry(result, "api").reach_bound is not None  # its screening trial did not get it: skipped, bounded
    assert _entry(result, "api").candidate is None


def test_a_cached_with_rule_trial_that_got_the_rule_sends_it_to_the_full_test_too(root):
    first = _suite(root)
    right = gate(root, first, **SCOPED)  # reach by the read trigger: web is judged, its with-rule trials cached
    assert _entry(right, "web").candidate.n > 0 and _entry(right, "web").candidate.trials[0].delivered is True
    result = gate(root, first, **MISJUDGED)  # no new screening trial: the cached ones say the rule got through
    web = _entry(result, "web")
    assert web.reach_bound is None and "got the rule" in web.note and result.replays == 0


def test_a_rule_that_breaks_a_scenario_it_reaches_is_still_caught(root):
    first = _suite(root)
    _scenario(root, "victim", "web/app.js", files={"web/app.js": "app\n"}, inverse=True)
    result = gate(root, first, **SCOPED)
    assert result.decision == "reject" and [e.scenario for e in result.regressions] == ["victim"]


@pytest.mark.parametrize("how,footprint,touched", [
    ("read", {"reads": ["web/app.js"], "writes": [], "cwds": ["."], "commands": []}, True),
    ("read", {"reads": ["api/x.py"], "writes": [], "cwds": ["web"], "commands": []}, False),
    # a test run at the root writes web/__pycache__: Claude Code loads nothing for that
    ("read", {"reads": [], "writes": ["web/__pycache__/a.pyc"], "cwds": ["."], "commands": [["python"]]}, False),
    ("touch", {"reads": [], "writes": ["web/__pycache__/a.pyc"], "cwds": ["."], "commands": []}, True),
    ("cwd", {"reads": ["web/app.js"], "writes": [], "cwds": ["."], "commands": []}, False),
    ("cwd", {"reads": [], "writes": [], "cwds": ["web/src"], "commands": []}, True),
    ("touch", {"reads": [], "writes": [], "cwds": ["."], "commands": [["ls", "web"]]}, True),
    ("touch", {"reads": [], "writes": ["api/x.py"], "cwds": ["."], "commands": [["ls", "api"]]}, False),
    ("read", None, True),  # recorded before footprints: proves nothing, counts as a touch
])
def test_each_host_trigger_reads_its_own_evidence(how, footprint, touched):
    assert reach.touches(footprint, ["web/**"], how) is touched


def test_the_bound_is_the_exact_zero_count_bound():
    assert reach.harm_bound(40) == pytest.approx(0.0722, abs=1e-4)
    assert reach.harm_bound(20) == pytest.approx(0.1391, abs=1e-4)
    assert 3 / 40 > reach.harm_bound(40)  # the rule of three rounds it up


def test_a_trial_keeps_its_footprint_from_the_kernel_trace_and_its_tool_calls(root):
    """`cd web && cat app.js`: the kernel's exec trace gives `cat`'s working folder, so the read is web/app.js."""
    from bot.replay import agents
    from bot.replay.engine import ReplayOptions, run_trial
    from bot.scenario import spec as sc

    folder = _scenario(root, "web", "app.js", files={"web/app.js": "app\n"})
    policy = yaml.safe_load((folder / "policy.yaml").read_text())
    policy["without_rule"][0] = {"bash": "cd web && cat app.js"}
    (folder / "policy.yaml").write_text(yaml.safe_dump(policy))
    trial = run_trial(sc.load(folder), "# Playbook\n", ReplayOptions(), 0, agents.make("builtin"))
    assert trial.verdict == "passed", trial.reason
    fp = trial.footprint
    assert "web" in fp["cwds"] and ["cat", "app.js"] in fp["commands"]
    assert "web/app.js" in fp["reads"] and fp["writes"] == ["right.txt"]
    assert reach.touches(fp, ["web/**"], "read") and reach.touches(fp, ["web/**"], "cwd")
    assert not reach.touches(fp, ["api/**"], "touch")


def test_the_plan_of_a_gate_counts_no_replay_where_reach_will_skip(root):
    from bot.gate import decision as gate_mod
    from bot.replay.engine import ReplayOptions

    first = _suite(root)
    opts = gate_mod.GateOptions(replay=ReplayOptions(), cache_dir=root / ".cache", suite_trials=3,
                                scope_reach=True, reach_trigger="read", jobs=1, test=SequentialTest())
    before = gate_mod.estimate(book(root), first, root / "scenarios", opts)
    assert before.scenarios.get("api", 0) >= 3  # its baseline is not cached yet: planned, with the full test
    gate(root, first, **SCOPED)
    after = gate_mod.estimate(book(root), first, root / "scenarios", opts)
    assert after.scenarios.get("api", 0) == 0 and after.replays == 0  # every trial cached, and api skipped


def test_the_report_shows_what_the_chosen_scope_cost_and_what_the_same_rule_would_cost_global(root):
    """Issue 54 item 4: a path-scoped candidate's report gives the trials its gate read with the rule as builtin's
    host delivers it (`api` skipped by reach) beside those the same rule global would read (`api` judged in full)."""
    first = _suite(root)
    result = gate(root, first, **SCOPED)
    assert _entry(result, "api").reach_bound is not None
    cost = result.scope_cost
    assert cost is not None and cost["global_replays"] > cost["scoped_replays"] + 3, cost
    assert "claude delivers it by `read` for web/**" in cost["reason"]
    data = report.as_json(result)
    assert data["scope_cost"]["scoped_replays"] == cost["scoped_replays"] and "not_replayed_by_reach" in data
    text = report.markdown(result, SequentialTest())
    assert (f"**Scope cost:** {cost['scoped_replays']:.1f} trials read with the rule scoped as the host delivers "
            f"it, {cost['global_replays']:.1f} if the same rule were global") in text
    # the estimate of the same gate, now its baselines are cached: nothing to run scoped, api's full test global
    from bot.gate.estimate import planned_scope

    opts = gate_mod_options(root)
    planned = planned_scope(book(root), first, root / "scenarios", opts)
    assert planned["scoped_replays"] == 0 and planned["global_replays"] > 0, planned
    assert gate_mod_estimate(root, first, opts).scope is None  # --estimate adds it (bot/cli/gate.py), not the plan


def test_a_rule_with_no_scope_has_no_scope_cost(root):
    path = setup(root)
    result = gate(root, path, jobs=1)
    assert result.scope_cost is None and report.as_json(result)["scope_cost"] is None
    assert "Scope cost" not in report.markdown(result, SequentialTest())


def gate_mod_options(root):
    from bot.gate import decision as gate_mod
    from bot.replay.engine import ReplayOptions

    return gate_mod.GateOptions(replay=ReplayOptions(), cache_dir=root / ".cache", suite_trials=3,
                                scope_reach=True, reach_trigger="read", jobs=1, test=SequentialTest())


def gate_mod_estimate(root, path, opts):
    from bot.gate import decision as gate_mod

    return gate_mod.estimate(book(root), path, root / "scenarios", opts)

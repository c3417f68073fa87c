"""The loop benchmark end to end on a tiny stream: real replays, capture, distill and gate (SIMULATED model).

Structural properties only: each failure becomes one incident through the real
capture code, each proposal is decided by its policy's gate (or admitted
unvalidated), admitted rules reach the prompts of later tasks, and the JSON has
the shape bench/loop.py documents. Outcomes (how many repeats, which rule is
admitted) are the benchmark's to measure, not this test's to pin.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import loop  # noqa: E402
from loopbench import report  # noqa: E402
from loopbench.run import POLICIES, LoopConfig  # noqa: E402
from loopbench.stream import StreamConfig, expected_repeat_share, make_stream  # noqa: E402

WEEK_KEYS = {"week": int, "failures": int, "repeat_share": float, "harmful_admitted": int, "playbook_size": int,
             "replays": int, "cost_usd": float}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    # Cheap scenarios only (shell fixtures), so the test stays fast; the suite still holds the victim.
    stream = StreamConfig(weeks=2, tasks_per_week=3, rates={"version-sync": 1.0, "skip-failing-test": 0.5},
                          occasional=("changelog-entry",), tail_per_week=1.0, tail_again=0.0)
    cfg = LoopConfig(seed=3, jobs=2, distill_every=2,
                     suite=("read-before-edit", "version-sync", "skip-failing-test", "changelog-entry"))
    root = tmp_path_factory.mktemp("loop")
    runs, parameters = loop.run_all(stream, cfg, list(POLICIES), root / "cache", root / "ws")
    return stream, cfg, runs, parameters


def test_json_has_the_documented_shape(tiny):
    stream, _, runs, parameters = tiny
    out = json.loads(json.dumps(report.as_json({n: r.weeks for n, r in runs.items()}, parameters)))
    assert set(out["policies"]) == set(POLICIES)
    assert out["simulated"] is True and "SIMULATED" in out["model"]
    for name, data in out["policies"].items():
        assert [w["week"] for w in data["weeks"]] == list(range(1, stream.weeks + 1)), name
        for week in data["weeks"]:
            for key, kind in WEEK_KEYS.items():
                assert isinstance(week[key], kind) or (kind is float and isinstance(week[key], int)), (name, key)
            assert 0.0 <= week["repeat_share"] <= 1.0
            share = week["repeats"] / week["failures"] if week["failures"] else 0
            assert week["repeat_share"] == pytest.approx(share, abs=1e-4)
    assert {"stream", "loop", "gates", "expected_no_loop", "elapsed_s"} <= set(out["parameters"])
    markdown = report.markdown({n: r.weeks for n, r in runs.items()}, parameters)
    assert "```mermaid" in markdown and "SIMULATED" in markdown and "| replaybook |" in markdown


def test_every_policy_replays_the_same_tasks(tiny):
    stream_cfg, cfg, runs, _ = tiny
    stream = make_stream(stream_cfg, cfg.seed)
    total = len(stream.tasks)
    for name, run in runs.items():
        assert sum(w.tasks for w in run.weeks) == total, name
        assert {i for i, _ in run.prompts} == {t.index for t in stream.tasks}, name


def test_no_loop_changes_nothing(tiny):
    *_, runs, _ = tiny
    none = runs["none"]
    assert all(w.playbook_size == 0 and w.replays == 0 and w.proposals == 0 for w in none.weeks)
    assert not none.store.all()
    assert all(rules == 0 for _, rules in none.prompts)


def test_each_failure_is_captured_into_one_incident(tiny):
    *_, runs, _ = tiny
    for name in ("single_run", "unvalidated", "replaybook"):
        run = runs[name]
        incidents = run.store.all()
        assert len(incidents) == sum(w.failures for w in run.weeks), name
        for incident in incidents:
            assert incident.source.key.startswith("loop-task-")
            assert incident.evidence  # the run's trace, through capture's transcript scanner
            if incident.triage:  # the simulated analyst's lines name nothing the trace shows (issue 55's check)
                assert "evidence" in (incident.triage_reason or ""), incident.triage_reason
            else:
                assert incident.believed and incident.actual  # the simulated analyst answered
        assert any(not i.triage for i in incidents), name  # grounded captures still feed distill


def test_proposals_are_gated_or_admitted_and_rules_reach_later_prompts(tiny):
    *_, runs, _ = tiny
    unvalidated = runs["unvalidated"]
    proposals = sum(w.proposals for w in unvalidated.weeks)
    assert sum(w.admitted for w in unvalidated.weeks) == proposals > 0
    assert sum(w.replays for w in unvalidated.weeks) == 0  # no gate
    for name in ("single_run", "replaybook"):
        run = runs[name]
        decided = sum(w.admitted + sum(w.rejections.values()) for w in run.weeks)
        assert decided == sum(w.proposals for w in run.weeks) > 0, name
        assert sum(w.replays for w in run.weeks) > 0, name
        assert not list(run.book.dir("proposed").glob("*.yaml"))  # each one decided, none left waiting
    for name, run in runs.items():
        admitted_at = min((i for i, rules in run.prompts if rules), default=None)
        if run.weeks[-1].playbook_size and name != "none":
            assert admitted_at is not None, f"{name}: no task saw an admitted rule"
    gated = runs["replaybook"]
    assert sum(w.replays for w in gated.weeks) >= sum(w.replays for w in runs["single_run"].weeks)


def test_expected_share_matches_the_stream_without_a_loop():
    cfg = StreamConfig()
    shares = []
    for seed in range(4):
        stream = make_stream(cfg, seed)
        seen, fails, repeats = set(), 0, 0
        for task in stream.tasks:
            if stream.modes[task.mode].kind == "done-right":
                continue
            fails += 1
            repeats += task.mode in seen
            seen.add(task.mode)
        shares.append(repeats / fails)
    expected = expected_repeat_share(cfg)["repeat_share"]
    assert abs(sum(shares) / len(shares) - expected) < 0.05, (shares, expected)


def test_the_replaybook_policy_gates_with_the_products_default_options(tmp_path):
    from dataclasses import fields

    from loopbench.noisy import gates
    from loopbench.run import gate_options

    from bot.gate import decision, stats
    from bot.replay.engine import ReplayOptions

    replay = ReplayOptions()
    opts = gate_options("replaybook", LoopConfig(), replay, tmp_path, 13)
    product = decision.GateOptions(replay=replay, jobs=LoopConfig().jobs, cache_dir=tmp_path)
    assert opts == product and opts.suite == stats.SuiteTest() and opts.suite.on_demand
    assert gate_options("single_run", LoopConfig(), replay, tmp_path, 13).suite != stats.SuiteTest()
    # the noisy preset's statistical gates judge the suite with the product's suite test too
    for name in ("replaybook_v1", "replaybook", "single_run_fair"):
        suite, product_suite = gates(13)[name].suite, stats.SuiteTest()  # memoised (the same answers): field by field
        assert all(getattr(suite, f.name) == getattr(product_suite, f.name) for f in fields(product_suite))

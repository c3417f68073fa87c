"""Issue 54's honest benchmark (SIMULATED agent): host delivery as a parameter, scope in the stream, the product's
reach test on the simulated trials, and the fixed blocks of reporting seeds, each reported on its own and pooled.

Nothing here pins a figure of the benchmark: the tests check the mechanics on small seeds.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import loop  # noqa: E402
from loopbench import noisy, simgate, targets  # noqa: E402
from loopbench.noise import Noise, NoiseConfig, Proposal  # noqa: E402
from loopbench.run import LoopConfig, Week  # noqa: E402
from loopbench.scope import AREAS, ScopeConfig, Scopes  # noqa: E402
from loopbench.stream import StreamConfig, make_stream  # noqa: E402

STREAM = StreamConfig(weeks=4)


def _main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = loop.main(["--preset", "noisy", "--quick", "--workers", "1", *argv])
    return code, out.getvalue(), err.getvalue()


def _world(seed: int, delivery: str = "scoped", **scope):
    stream = make_stream(STREAM, seed)
    suite = noisy.suite_modes(stream, 30)
    scopes = Scopes(ScopeConfig(delivery=delivery, **scope), seed, stream.modes)
    return stream, suite, scopes


# -- delivery -------------------------------------------------------------------------------------------------

def test_whole_file_delivery_reaches_every_prompt_and_scoped_only_its_scopes_scenarios():
    stream, suite, scoped = _world(5)
    _, _, whole = _world(5, "whole-file")
    rule = ("lint", scoped.home("lint-disable"))
    reached = [s for s in suite if scoped.reaches(*rule, s)]
    assert reached and len(reached) < len(suite)  # scoped: some, not all
    for sid in reached:  # each reached one shares the task type and holds a file of the area
        assert stream.modes[sid].task_type == "lint" and rule[1] in scoped.touch(sid)
    assert all(whole.reaches(*rule, s) and whole.reach_chance(*rule, s) == 1.0 for s in suite)
    # within a reached scenario a run gets the rule only when it touches the area (its home: always)
    assert scoped.reach_chance(*rule, "lint-disable") == 1.0
    assert all(0 < scoped.reach_chance(*rule, s) <= 1 for s in reached)
    assert all(scoped.reach_chance(*rule, s) == 0 for s in suite if s not in reached)


def test_mix_gives_a_share_of_projects_a_whole_file_host():
    modes = make_stream(STREAM, 1).modes
    hosts = lambda share: [Scopes(ScopeConfig("mix", whole_file_share=share), s, modes).whole_file  # noqa: E731
                           for s in range(1000, 1200)]
    assert not any(hosts(0.0)) and all(hosts(1.0))
    assert 40 <= sum(hosts(ScopeConfig().whole_file_share)) <= 95  # 2 of 6: about 67 of 200
    assert hosts(0.5) == hosts(0.5)  # per seed, the same every run


def test_a_whole_file_host_judges_every_suite_scenario_and_a_scoped_one_skips_those_out_of_reach():
    stream, suite, _ = _world(7)
    gate = noisy.gates(len(suite), simgate.issue54_options(simgate.product_options()))["replaybook"]
    judged = {}
    for delivery in ("scoped", "whole-file"):
        scopes = Scopes(ScopeConfig(delivery=delivery), 7, stream.modes)
        noise = Noise(NoiseConfig(), 7, stream.modes, suite, scopes)
        run = noisy.NoisyRun("replaybook", stream, noise, LoopConfig(seed=7), gate)
        noise.mistake = lambda m: 1.0 if m == "lint-disable" else 0.0  # the rule's scenario always fails without it
        proposal = Proposal("lint-disable", 0, "good", 1.0, scope="lint", area=scopes.home("lint-disable"))
        texts = run._texts(proposal)
        runner = simgate.SimRunner(run.gate, run._draw_trial, run.store)
        scoped = not scopes.whole_file
        v = simgate.decide(run.gate, runner, "lint-disable", suite, *texts("lint-disable"), proposal.id,
                           texts=texts if scoped else None, paths=(f"{proposal.area}/**",))
        assert v.decision == "admit"
        judged[delivery] = [e for e in v.result.suite if e.candidate is not None]
        if scoped:
            skipped = [e for e in v.result.suite if e.candidate is None]
            assert skipped and all("cannot reach" in e.note or "not replayed" in e.note for e in skipped)
            for e in skipped:
                if e.reach_trials:  # the product's reach test: none of its baseline trials read the area
                    assert e.reach_bound == pytest.approx(1 - 0.05 ** (1 / e.reach_trials))
    assert len(judged["whole-file"]) == len(suite) - 1 > len(judged["scoped"])
    assert run.gate.scope_reach is False  # the whole-file project's gate prices the rule as global


def test_the_reach_test_reads_the_simulated_footprints():
    """A scenario whose baseline trials never read the rule's area is not replayed with it, with its bound; one
    whose trials always do (the area is its home) is judged in full."""
    stream, suite, scopes = _world(9, p_other_area=0.0)  # fixtures hold their home area only
    gate = noisy.gates(len(suite), simgate.issue54_options(simgate.product_options()))["replaybook"]
    noise = Noise(NoiseConfig(), 9, stream.modes, suite, scopes)
    noise.mistake = lambda m: 1.0 if m == "monorepo-test-cwd" else 0.0
    run = noisy.NoisyRun("replaybook", stream, noise, LoopConfig(seed=9), gate)
    area = scopes.home("monorepo-test-cwd")
    proposal = Proposal("monorepo-test-cwd", 0, "good", 1.0, scope="testing", area=area)
    texts = run._texts(proposal)
    runner = simgate.SimRunner(run.gate, run._draw_trial, run.store)
    v = simgate.decide(run.gate, runner, "monorepo-test-cwd", suite, *texts("monorepo-test-cwd"), proposal.id,
                       texts=texts, paths=(f"{area}/**",))
    testing = [e for e in v.result.suite if stream.modes[e.scenario].task_type == "testing"]
    assert testing
    for e in testing:  # every testing scenario got the rule's text; the reach test decided which ran with it
        if scopes.home(e.scenario) == area:
            assert e.candidate is not None and e.reach_trials is None
        else:
            assert e.candidate is None and e.reach_trials == 40 and "not replayed" in e.note
    assert v.by_purpose["reach"] > 0


def test_a_harmful_rule_whose_victim_it_cannot_reach_is_harmless_only_under_scoped_delivery():
    stream, suite, scoped = _world(3, p_other_area=0.0, harm_near=0.0)
    _, _, whole = _world(3, "whole-file")
    far = next(s for s in suite if stream.modes[s].task_type != "lint")
    rule = Proposal("lint-disable", 0, "harmful", 0.8, far, 0.6, scope="lint", area=scoped.home("lint-disable"))
    assert not Noise(NoiseConfig(), 3, stream.modes, suite, scoped).harms(rule)
    assert Noise(NoiseConfig(), 3, stream.modes, suite, whole).harms(rule)
    hurt = Proposal("lint-disable", 1, "self-harm", -0.3, scope="lint")
    assert Noise(NoiseConfig(), 3, stream.modes, suite, scoped).harms(hurt)  # SkillsBench: its own task


# -- scope in the stream ----------------------------------------------------------------------------------

def test_distill_scopes_a_rule_as_narrowly_as_its_incidents_allow():
    stream, suite, scopes = _world(11)
    noise = Noise(NoiseConfig(), 11, stream.modes, suite, scopes)
    for mode in stream.modes.values():
        if mode.kind == "done-right":
            continue
        p = noise.proposal(mode.id, 0)
        assert p.scope == mode.task_type and p.area in ("", scopes.home(mode.id))
        assert (p.area, p.scope) == (noise.proposal(mode.id, 1).area, noise.proposal(mode.id, 1).scope)
        if mode.kind == "oneoff":
            assert p.area  # a one-off's incidents name its files
    areas = [noise.proposal(m, 0).area for m in stream.modes if stream.modes[m].kind == "recurring"]
    assert all(a in AREAS or a == "" for a in areas)
    none = Scopes(ScopeConfig(p_path=0.0), 11, stream.modes)
    assert all(not none.proposed(m)[1] for m, mode in stream.modes.items() if mode.kind != "oneoff")


def test_the_delivery_parameter_is_checked_and_recorded():
    with pytest.raises(SystemExit) as bad:  # argparse's own error: one line, exit 2
        _main("--seeds", "1", "--delivery", "mix", "--whole-file-share", "2", "--policies", "none")
    assert bad.value.code == 2
    for delivery in ("scoped", "whole-file", "mix"):
        code, out, _ = _main("--seeds", "1", "--delivery", delivery, "--policies", "single_run_fair,replaybook",
                             "--suite", "30", "--json")
        par = json.loads(out)["parameters"]
        assert code == 0 and par["scope"]["delivery"] == delivery
        assert any(row["name"] == "host delivery" and row["value"].startswith(delivery) for row in par["table"])


# -- blocks -------------------------------------------------------------------------------------------------

def test_blocks_are_fixed_reported_on_their_own_and_pooled():
    code, out, _ = _main("--blocks", "2", "--seeds", "2", "--suite", "30", "--json",
                         "--policies", "single_run_fair,replaybook,oracle")
    data = json.loads(out)
    assert code == 0 and data["parameters"]["seeds"] == [1000, 1001, 1002, 1003]
    blocks = data["blocks"]["blocks"]
    assert [b["seeds"] for b in blocks] == [[1000, 1001], [1002, 1003]]
    for key in ("admissions", "harmful_admitted", "replays", "candidates_gated", "failures_last4"):
        pooled = data["policies"]["replaybook"]["summary"][key]
        assert sum(b["summaries"]["replaybook"][key] for b in blocks) == pooled, key
    for t in data["blocks"]["targets"]:  # held only if held pooled and in every block
        assert t["met"] == (t["pooled_met"] and all(t["blocks_met"])) and len(t["blocks"]) == 2
    code, md, _ = _main("--blocks", "2", "--seeds", "1", "--suite", "30", "--policies", "single_run_fair,replaybook")
    assert code == 0 and "## Blocks of 1 seeds" in md and "| 1000–1000 |" in md and "| 1001–1001 |" in md


def test_a_target_that_fails_in_one_block_does_not_hold():
    row = lambda met, value="x": {"target": "t", "key": "k", "value": value, "met": met}  # noqa: E731
    got = targets.across_blocks([row(True)], [[row(True)], [row(False)], [row(True)], [row(True)]])
    assert got[0]["met"] is False and got[0]["pooled_met"] is True and got[0]["blocks_met"] == [True, False, True, True]
    assert targets.across_blocks([row(True)], [[row(True)]] * 4)[0]["met"] is True
    assert targets.across_blocks([row(False)], [[row(True)]] * 4)[0]["met"] is False


def test_the_harm_target_is_read_pooled_with_its_wilson_bound_and_per_block_without():
    s = {"replaybook": {"replays_per_gated_candidate": 10, "replays_per_admission": 50, "harmful_admitted": 9,
                        "admissions": 1000, "harmful_rate": 0.009, "harmful_wilson_upper95": 0.017,
                        **{f"usd_per_admission {a}": 1.0 for a in ("Sonnet-class (claude-sonnet-4-6)",
                                                                  "Haiku-class (claude-haiku-4-5)")}}}
    no_effect = {"p_admit": 0.01, "at_pass_rate": 0.5}
    pooled = {t["key"]: t["met"] for t in targets.evaluate(s, {}, no_effect)}
    block = {t["key"]: t["met"] for t in targets.evaluate(s, {}, no_effect, pooled=False)}
    assert pooled["harmful"] is False and block["harmful"] is True  # 0.9% but its upper bound 1.7% > 1.5%
    assert pooled["per_gated"] and pooled["per_admission"]


def test_a_whole_file_project_in_a_loop_run_gates_every_candidate_as_global():
    stream = make_stream(STREAM, 1000)
    table = noisy.gates(30, simgate.issue54_options(simgate.product_options()))
    runs = {d: noisy.run_seed(make_stream(STREAM, 1000), 1000, LoopConfig(), NoiseConfig(), ["replaybook"], 30, 3,
                              True, table, ScopeConfig(delivery=d))["replaybook"] for d in ("scoped", "whole-file")}
    replays = {d: sum(w.replays for w in weeks) for d, weeks in runs.items()}
    assert replays["whole-file"] > replays["scoped"] > 0
    assert stream.weeks and isinstance(runs["scoped"][0], Week)

"""The noisy preset of the loop benchmark (SIMULATED agent): its draws, its gates' admit rates, its JSON.

Nothing here pins an outcome of the benchmark; the admit-rate tests check the
simulation against the rates the noise model and ``bot.gate.stats`` imply,
within their sampling error.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import loop  # noqa: E402
from loopbench import noisy  # noqa: E402
from loopbench.catalogue import Mode  # noqa: E402
from loopbench.noise import Noise, NoiseConfig, Proposal  # noqa: E402
from loopbench.run import LoopConfig, Week  # noqa: E402
from loopbench.stream import StreamConfig, make_stream  # noqa: E402

from bot.gate import stats  # noqa: E402

STREAM = StreamConfig(weeks=4)


class Recording(Noise):
    """A Noise that records every draw a policy asks for, by key."""

    def __init__(self, *args):
        super().__init__(*args)
        self.tasks: dict = {}
        self.proposals: dict = {}

    def run(self, mode, rules, q, *key, guard=""):
        ok = super().run(mode, rules, q, *key, guard=guard)
        if key[0] == "task":
            self.tasks[key] = (mode, ok, tuple(r.id for r in rules), guard)
        return ok

    def proposal(self, mode, k, not_redundant=False):
        p = super().proposal(mode, k, not_redundant)
        self.proposals[(mode, k)] = p
        return p


def _runs(seed: int) -> dict[str, Recording]:
    stream = make_stream(STREAM, seed)
    out = {}
    for name, gate in [("none", None), ("unvalidated", None), *noisy.gates(13).items()]:
        noise = Recording(NoiseConfig(), seed, stream.modes, noisy.suite_modes(stream))
        noisy.NoisyRun(name, stream, noise, LoopConfig(seed=seed), gate, 3, True).run()  # learning on
        out[name] = noise
    return out


def test_the_draws_are_deterministic_per_seed_and_differ_between_seeds():
    stream = make_stream(STREAM, 3)
    a, b, c = (Noise(NoiseConfig(), s, stream.modes, noisy.suite_modes(stream)) for s in (3, 3, 4))
    modes = sorted(stream.modes)
    assert [a.mistake(m) for m in modes] == [b.mistake(m) for m in modes]
    assert [a.proposal(m, k) for m in modes for k in range(3)] == [b.proposal(m, k) for m in modes for k in range(3)]
    assert [a.mistake(m) for m in modes] != [c.mistake(m) for m in modes]
    # order does not matter: a draw is a function of (seed, key), not of what was drawn before
    assert [a.proposal(m, 0) for m in reversed(modes)] == [b.proposal(m, 0) for m in modes][::-1]


def test_every_policy_sees_the_same_streams():
    runs = _runs(5)
    base = runs["none"]
    assert len(base.tasks) == STREAM.weeks * STREAM.tasks_per_week
    for name, noise in runs.items():
        # the same task with the same playbook has the same outcome in every policy
        same = [k for k in base.tasks if noise.tasks[k][2:] == ((), "")]
        assert same and all(noise.tasks[k][:2] == base.tasks[k][:2] for k in same), name
        # the k-th proposal for a mode is the same proposal whichever policy asked for it
        for key, proposal in noise.proposals.items():
            assert proposal == runs["unvalidated"].proposals.get(key, proposal), (name, key)
    assert runs["unvalidated"].proposals  # the loop did propose


def _admit_rate(gate, p: float, n: int) -> float:
    """The share of n no-effect proposals the gate admits, on a scenario with mistake rate p and no suite."""
    mode = Mode("m", "recurring", "a task", "a rule", "a rule")
    noise = Noise(NoiseConfig(), 11, {"m": mode}, ["m"])
    noise.mistake = lambda _mode: p  # a stated rate instead of a Beta draw
    run = noisy.NoisyRun("x", None, noise, LoopConfig(q0=1.0, q_slope=0.0), gate)
    run.cache = False  # independent proposals: no trial kept from the last one (the product's cache would)
    week = Week(1)
    return sum(run._gate(week, Proposal("m", k, "redundant", 0.0)) == "" for k in range(n)) / n


def _within(rate: float, expected: float, n: int) -> bool:
    return abs(rate - expected) <= 4 * math.sqrt(max(expected * (1 - expected), 1e-4) / n) + 1e-9


@pytest.mark.parametrize("p", [0.3, 0.6])
def test_single_run_admits_a_no_effect_rule_at_the_rate_the_noise_implies(p):
    n = 2000
    passes = (1 - p) * (1 - NoiseConfig().flaky)
    implied = (1 - passes) * passes  # fails once without the rule, passes once with it
    assert _within(_admit_rate(noisy.gates(13)["single_run"], p, n), implied, n)


@pytest.mark.parametrize("p", [0.3, 0.6])
def test_the_statistical_gates_admit_a_no_effect_rule_at_the_rate_stats_computes(p):
    n = 600
    passes = (1 - p) * (1 - NoiseConfig().flaky)
    paired = stats.paired_characteristics(stats.PairedTest(), passes, passes).p_admit
    sequential = stats.operating_characteristics(stats.SequentialTest(), passes, passes).p_admit
    assert _within(_admit_rate(noisy.gates(13)["replaybook"], p, n), paired, n)
    assert _within(_admit_rate(noisy.gates(13)["replaybook_v1"], p, n), sequential, n)


def test_the_paired_test_keeps_the_gates_targets():
    test = stats.PairedTest()
    assert stats.paired_characteristics(test, 0.5, 0.5).p_admit <= 0.025
    assert stats.paired_characteristics(test, 0.4, 0.4).p_admit <= 0.025
    assert stats.paired_characteristics(test, 0.0, 0.9).p_admit >= 0.9
    # A good rule under noise: 0.62 (0.76 before the minimal-effect null), where 0-of-3-before admits 0.2.
    assert stats.paired_characteristics(test, 0.4, 0.85).p_admit >= 0.6
    assert stats.operating_characteristics(stats.SequentialTest(), 0.4, 0.85).p_admit < 0.25


def test_the_paired_test_refuses_a_rule_too_weak_to_be_useful_as_one_with_no_effect():
    """A useless rule (it cuts a 0.6 mistake rate by less than a tenth: 0.4 -> 0.46) is admitted at most 0.5%
    of the time, under a third of what a null of "no effect" (theta0 0.5) gives it (1.65%)."""
    from dataclasses import replace

    test, plain = stats.PairedTest(), replace(stats.PairedTest(), theta0=0.5)
    weak, weak_plain = (stats.paired_characteristics(t, 0.4, 0.46).p_admit for t in (test, plain))
    assert weak <= 0.005 and weak < weak_plain / 3
    with pytest.raises(ValueError):
        replace(test, theta0=0.95)  # a null above H1 is no test


def test_the_preset_json_has_the_documented_shape():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert loop.main(["--preset", "noisy", "--quick", "--seeds", "2", "--json"]) == 0
    data = json.loads(out.getvalue())
    assert data["simulated"] is True and "SIMULATED" in data["model"]
    assert data["parameters"]["seeds"] == [1000, 1001] and "noise" in data["parameters"]
    assert set(data["policies"]) == set(noisy.NOISY_POLICIES)
    for name, policy in data["policies"].items():
        weeks, per_seed = policy["weeks"], policy["seeds"]
        assert [w["week"] for w in weeks] == [1, 2, 3, 4] and set(per_seed) == {"1000", "1001"}
        for i, week in enumerate(weeks):
            for key in ("failures", "repeats", "replays", "admitted", "good_rejected", "useless_admitted",
                        "harmful_admitted", "playbook_size"):
                assert week[key] == sum(s[i][key] for s in per_seed.values()), (name, key)
            share = week["repeats"] / week["failures"] if week["failures"] else 0.0
            assert week["repeat_share"] == pytest.approx(share, abs=1e-4)
        for key in ("failures", "repeat_share_last4", "useless_admitted", "good_rejected", "bad_admitted"):
            assert key in policy["figures"] and key in policy["spread"]
        assert set(policy["spread"]["failures"]) == {"mean", "min", "max"}
    assert {t["target"] for t in data["targets"]}


def test_the_product_simulated_agent_takes_per_scenario_mistake_rates_from_its_policy():
    from bot.errors import BadInput
    from bot.replay.policy import parse_policy

    def request(system: str) -> dict:
        return {"system": system, "messages": [{"role": "user", "content": "do it"}]}

    steps = {"branch_on": "the rule", "with_rule": [{"say": "right"}], "without_rule": [{"say": "wrong"}]}
    plain = parse_policy(steps)
    assert plain.branch_for(request("the rule")) == "with_rule"  # the defaults: the scripted agent as before
    assert plain.branch_for(request("nothing")) == "without_rule"
    noisy_policy = parse_policy({**steps, "mistake": 0.6, "effect": 0.5})
    n = 4000
    without = sum(noisy_policy.seeded(noise=0.0, seed=s).branch_for(request("nothing")) == "without_rule"
                  for s in range(n)) / n
    with_rule = sum(noisy_policy.seeded(noise=0.0, seed=s).branch_for(request("the rule")) == "without_rule"
                    for s in range(n)) / n
    assert _within(without, 0.6, n) and _within(with_rule, 0.3, n)
    with pytest.raises(BadInput) as bad:
        parse_policy({**steps, "mistake": 1.5})
    assert any("`mistake`" in p for p in bad.value.problems)


def test_the_paired_table_in_docs_gate_is_what_stats_computes():
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "gate.md").read_text(encoding="utf-8")
    text = text[text.index("### For a noisy agent"):text.index("## 3. The whole suite")]
    text = text[text.index("| before → after pass rate |"):]
    text = text[:text.index("\n\n")]  # that table only
    rows = re.findall(r"^\| ([\d.]+) → ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    assert len(rows) == 9
    for b, a, p, runs, sp, sruns in rows:
        paired = stats.paired_characteristics(stats.PairedTest(), float(b), float(a))
        seq = stats.operating_characteristics(stats.SequentialTest(), float(b), float(a))
        assert (f"{paired.p_admit:.4f}", f"{paired.expected_runs:.1f}") == (p, runs), (b, a)
        assert (f"{seq.p_admit:.4f}", f"{seq.expected_runs:.1f}") == (sp, sruns), (b, a)


def test_the_suite_baseline_on_demand_decides_as_the_whole_baseline_for_fewer_replays():
    """The noisy preset's gate in the product's order (the baseline on demand) against the whole 40-trial
    baseline up front, on the same draws: every week's decisions are the same, the replays fewer."""
    from dataclasses import replace

    stream = make_stream(STREAM, 7)

    def run(on_demand: bool):
        gate = noisy.gates(13)["replaybook"]
        table = {"replaybook": replace(gate, suite=replace(gate.suite, on_demand=on_demand))}
        return noisy.run_seed(stream, 7, LoopConfig(), NoiseConfig(), ["replaybook"], table=table)["replaybook"]

    lazy, full = run(True), run(False)
    decided = lambda weeks: [(w.admitted, w.admitted_harmful, dict(w.rejections)) for w in weeks]  # noqa: E731
    assert decided(lazy) == decided(full) and sum(w.admitted for w in lazy) > 0
    assert sum(w.replays for w in lazy) < sum(w.replays for w in full)

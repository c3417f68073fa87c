"""Parallel gates decide as a one-job gate does: same seed, same trials read, same decision and report.

Trials run ahead on a shared pool and across suite scenarios at once, but
every test reads them in trial order (bot.gate.pool), so neither --jobs nor
which trial finishes first can change what is decided.
"""

from __future__ import annotations

import random
import threading
import time

from support.gate import book, mini_scenario, setup

from bot.gate import decision as gate_mod
from bot.gate import report as gate_report
from bot.gate import stats
from bot.gate.pool import Pool, Stream, cores
from bot.replay.engine import ReplayOptions


def _gate(root, rule, jobs: int, seed: int) -> gate_mod.GateResult:
    opts = gate_mod.GateOptions(replay=ReplayOptions(noise=0.25, seed=seed), jobs=jobs, cache_dir=None,
                                suite=stats.SuiteTest(baseline_n=4, max_n=6))
    return gate_mod.run_gate(book(root), rule, root / "scenarios", opts)


def _trials(side):
    return None if side is None else [(t.trial, t.verdict) for t in side.trials]


def _report(result) -> str:
    # The one line that may differ: how many trials ran ahead, which depends on timing by nature.
    return "\n".join(line for line in gate_report.markdown(result, stats.SequentialTest()).splitlines()
                     if not line.startswith("Run ahead and not needed"))


def test_jobs_change_no_decision_and_no_report(root):
    rule = setup(root)
    for sid in ("suite-a", "suite-b"):
        mini_scenario(root, sid)
    for seed in (1, 4):
        one = _gate(root, rule, jobs=1, seed=seed)
        four = _gate(root, rule, jobs=4, seed=seed)
        assert one.speculative == 0
        assert (four.decision, four.reason) == (one.decision, one.reason)
        assert _trials(four.before) == _trials(one.before) and _trials(four.after) == _trials(one.after)
        assert [(e.scenario, _trials(e.baseline), _trials(e.candidate), e.regressed) for e in four.suite] == \
               [(e.scenario, _trials(e.baseline), _trials(e.candidate), e.regressed) for e in one.suite]
        assert (four.replays, four.model_calls, four.cost_usd) == (one.replays, one.model_calls, one.cost_usd)
        assert _report(four) == _report(one)


def test_sequential_sides_stop_at_the_first_decisive_trial(root):
    """With 4 jobs the test still stops where it first could: every shorter prefix was 'continue'."""
    rule = setup(root)
    result = _gate(root, rule, jobs=4, seed=2)
    test = stats.SequentialTest()
    for side, decide in ((result.before, test.before), (result.after, test.after)):
        if side is None:
            continue
        scored = [t.verdict == "passed" for t in side.trials if t.verdict != "unscored"]
        for k in range(len(scored)):
            assert decide(sum(scored[:k]), k - sum(scored[:k])) == "continue"
        assert decide(sum(scored), len(scored) - sum(scored)) == side.outcome


def test_a_stream_reads_in_index_order_whatever_finishes_first():
    pool = Pool(4)
    rng = random.Random(3)
    delays = [rng.uniform(0, 0.03) for _ in range(40)]
    finished: list[int] = []
    lock = threading.Lock()

    def run(i: int) -> int:
        time.sleep(delays[i])
        with lock:
            finished.append(i)
        return i

    try:
        stream = Stream(pool, run)
        read = [stream.next(ahead=4) for _ in range(20)]
        stream.close()
    finally:
        pool.close()
    assert read == list(range(20))
    assert finished != sorted(finished)  # they did finish out of order
    assert max(finished) < 20 + 4  # nothing ran further ahead than asked


def test_jobs_default_to_the_cores_this_process_may_use():
    assert cores() >= 1
    assert gate_mod.GateOptions().jobs == cores()

"""What a gate costs and what each budget buys: exact distributions of replays, and the gate as a pure walk.

``bot.gate.stats`` gives each test's error rates and expected trials. Here each test's whole distribution of
(outcome, trials) is walked exactly, and convolved over the gate (the own scenario's test, then every suite
scenario, each judged: the gate judges all of them, not only until the first regression), so that for a budget of
B fresh replays (``gate.budget``) the chance of each verdict is exact:

* admit within B: the own test passes, no suite scenario regresses, and all of it took at most B replays;
* otherwise reject or inconclusive (which of the two depends on the order the trials ran in; a budget never turns
  a reject into an admit, so it never raises a false admission: P(admit within B) <= P(admit)).

Suite scenarios are taken with their baseline cached (run before, or carried from the admitted gate:
``bot.gate.reuse``): the candidate's trials against a baseline of ``baseline_n`` trials, binomial at its rate.

``walk`` runs the same gate as a pure function over a ``draw(side, scenario, index) -> passed`` callback, with
the product's own tests and budget rule, so a simulation (``bench/loop.py``, the tests) decides exactly as the
gate would on those outcomes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from bot.gate import stats

Dist = dict[int, float]  # trials -> probability


def _convolve(a: Dist, b: Dist) -> Dist:
    out: Dist = {}
    for i, p in a.items():
        for j, q in b.items():
            out[i + j] = out.get(i + j, 0.0) + p * q
    return out


def _path_dist(decide, p: float) -> tuple[Dist, Dist]:
    """(trials -> P(ends 'pass' there), trials -> P(ends 'fail' there)) of a sequential ``decide(passes, fails)``."""
    wins: Dist = {}
    losses: Dist = {}

    @lru_cache(maxsize=None)
    def reach(passes: int, fails: int) -> float:
        if passes == fails == 0:
            return 1.0
        total = 0.0
        if passes and decide(passes - 1, fails) == "continue":
            total += reach(passes - 1, fails) * p
        if fails and decide(passes, fails - 1) == "continue":
            total += reach(passes, fails - 1) * (1 - p)
        return total

    frontier, seen = [(0, 0)], set()
    while frontier:
        passes, fails = frontier.pop()
        if (passes, fails) in seen:
            continue
        seen.add((passes, fails))
        state = decide(passes, fails)
        if state == "continue":
            frontier += [(passes + 1, fails), (passes, fails + 1)]
            continue
        into = wins if state == "pass" else losses
        into[passes + fails] = into.get(passes + fails, 0.0) + reach(passes, fails)
    return wins, losses


def own_dist(test: stats.SequentialTest | stats.PairedTest | stats.BaselineTest, p_before: float, p_after: float) -> tuple[Dist, Dist]:
    """(replays -> P(the own test passes there), replays -> P(it fails there)), exactly; for ``BaselineTest``
    with its baseline cached (binomial at ``p_before``), so its replays are the rule's trials only."""
    if isinstance(test, stats.PairedTest):
        win, loss = p_after * (1 - p_before), p_before * (1 - p_after)
        passed: Dist = {}
        failed: Dist = {}
        layer = {(0, 0): 1.0}
        for pairs in range(test.max_pairs + 1):
            nxt: dict[tuple[int, int], float] = {}
            for (w, l), pr in layer.items():
                state = test.decide(w, l, pairs)
                if state != "continue":
                    into = passed if state == "pass" else failed
                    into[2 * pairs] = into.get(2 * pairs, 0.0) + pr
                    continue
                for key, q in (((w + 1, l), win), ((w, l + 1), loss), ((w, l), 1 - win - loss)):
                    if q > 0:
                        nxt[key] = nxt.get(key, 0.0) + pr * q
            layer = nxt
        return passed, failed
    if isinstance(test, stats.BaselineTest):  # the baseline cached: only the rule's trials are replayed
        n, passed, failed = test.baseline_n, {}, {}
        for bp in range(n + 1):
            weight = math.comb(n, bp) * p_before**bp * (1 - p_before) ** (n - bp)
            if weight < 1e-15:
                continue
            ok, bad = _path_dist(lambda p, f, b=bp: test.decide(b, n, p, f), p_after)
            for into, dist in ((passed, ok), (failed, bad)):
                for runs, pr in dist.items():
                    into[runs] = into.get(runs, 0.0) + weight * pr
        return passed, failed
    b_pass, b_fail = _path_dist(test.before, p_before)
    a_pass, a_fail = _path_dist(test.after, p_after)
    return _convolve(b_pass, a_pass), _merge(b_fail, _convolve(b_pass, a_fail))


def _merge(a: Dist, b: Dist) -> Dist:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v
    return out


def suite_dist(test: stats.SuiteTest, p_baseline: float, p_candidate: float, k: int) -> tuple[Dist, Dist]:
    """(replays -> P(no regression, ending there), replays -> P(regressed, ending there)) of one suite scenario,
    its baseline of ``test.baseline_n`` trials cached (binomial at ``p_baseline``); a baseline that never passed is
    not judged (0 replays)."""
    n = test.baseline_n
    clean: Dist = {}
    regressed: Dist = {}
    for bp in range(n + 1):
        weight = math.comb(n, bp) * p_baseline**bp * (1 - p_baseline) ** (n - bp)
        if weight < 1e-15:
            continue
        if bp == 0:
            clean[0] = clean.get(0, 0.0) + weight
            continue
        ok, bad = _path_dist(lambda p, f, b=bp: test.decide(b, n, p, f, k), p_candidate)
        for into, dist in ((clean, ok), (regressed, bad)):
            for runs, pr in dist.items():
                into[runs] = into.get(runs, 0.0) + weight * pr
    return clean, regressed


@dataclass(frozen=True)
class Priced:
    """A whole gate's exact figures under a budget of fresh replays (None: no budget)."""

    p_admit: float  # admitted within the budget
    p_admit_unbounded: float  # admitted with no budget: the budget only ever lowers it
    p_within: float  # decided (admit or reject, every test ended) within the budget
    expected_replays: float  # E[min(replays the gate would run, budget)]
    expected_unbounded: float


def gate_price(own: tuple[Dist, Dist], suite: list[tuple[Dist, Dist]], budget: int | None = None) -> Priced:
    """The figures of a gate whose own test has distribution ``own`` and whose suite scenarios have ``suite``
    (each from ``own_dist`` / ``suite_dist``), under ``budget``."""
    own_pass, own_fail = own
    clean: Dist = {0: 1.0}  # every suite scenario clean, by total trials
    every: Dist = {0: 1.0}  # every suite scenario, whatever it found
    for ok, bad in suite:
        clean = _convolve(clean, ok)
        every = _convolve(every, _merge(ok, bad))
    admit = _convolve(own_pass, clean)
    total = _merge(own_fail, _convolve(own_pass, every))
    cap = math.inf if budget is None else budget
    return Priced(p_admit=sum(p for r, p in admit.items() if r <= cap),
                  p_admit_unbounded=sum(admit.values()),
                  p_within=sum(p for r, p in total.items() if r <= cap),
                  expected_replays=sum(p * min(r, cap) for r, p in total.items()),
                  expected_unbounded=sum(p * r for r, p in total.items()))


# -- the gate as a pure walk over trial outcomes ------------------------------------------------------------------


@dataclass
class Walked:
    decision: str  # admit | reject | inconclusive
    replays: int  # trials drawn (every one fresh: the walk has no cache)
    regressed: list[str]
    undecided: list[str]


def walk(draw: Callable[[str, str, int], bool], own: stats.SequentialTest | stats.PairedTest | stats.BaselineTest,
         own_id: str,
         suite: stats.SuiteTest, baselines: dict[str, list[bool]], budget: int | None = None) -> Walked:
    """The gate on the outcomes ``draw(side, scenario, index)`` gives (side: 'before', 'after', 'with rule'), in
    the gate's order and with its tests (``bot.gate.decision``): the own scenario, then each suite scenario against
    its cached baseline ``baselines[sid]`` (a list of outcomes; every scenario judged; ``baselines[own_id]``,
    when given, is the own scenario's, which ``BaselineTest`` reads and the suite skips). A draw is refused once
    ``budget`` draws were made: the tests it left undecided make the gate inconclusive, unless a regression
    already rejects."""
    spent = 0

    class _Spent(Exception):
        pass

    def one(side: str, sid: str, index: int) -> bool:
        nonlocal spent
        if budget is not None and spent >= budget:
            raise _Spent
        spent += 1
        return draw(side, sid, index)

    try:
        if isinstance(own, stats.PairedTest):
            wins = losses = pairs = 0
            while (state := own.decide(wins, losses, pairs)) == "continue":
                b, a = one("before", own_id, pairs), one("after", own_id, pairs)
                wins, losses, pairs = wins + (a and not b), losses + (b and not a), pairs + 1
            if state != "pass":
                return Walked("reject", spent, [], [])
        elif isinstance(own, stats.BaselineTest):
            base = baselines.get(own_id) or []
            bp, bn = sum(base), len(base)
            passes = fails = 0
            while (state := own.decide(bp, bn, passes, fails)) == "continue":
                ok = one("after", own_id, passes + fails)
                passes, fails = passes + ok, fails + (not ok)
            if state != "pass":
                return Walked("reject", spent, [], [])
        else:
            for side, decide in (("before", own.before), ("after", own.after)):
                passes = fails = 0
                while (state := decide(passes, fails)) == "continue":
                    ok = one(side, own_id, passes + fails)
                    passes, fails = passes + ok, fails + (not ok)
                if state != "pass":
                    return Walked("reject", spent, [], [])
    except _Spent:
        return Walked("inconclusive", spent, [], [own_id])
    others = {sid: base for sid, base in baselines.items() if sid != own_id}
    k, regressed, undecided = len(others), [], []
    for sid, base in others.items():
        bp, bn = sum(base), len(base)
        if bp == 0:
            continue  # not judged: it fails with the current playbook too
        passes = fails = 0
        try:
            while (state := suite.decide(bp, bn, passes, fails, k)) == "continue":
                ok = one("with rule", sid, passes + fails)
                passes, fails = passes + ok, fails + (not ok)
        except _Spent:
            undecided.append(sid)
            continue
        if state == "fail":
            regressed.append(sid)
    decision = "reject" if regressed else "inconclusive" if undecided else "admit"
    return Walked(decision, spent, regressed, undecided)


def curtailing(test: stats.PairedTest | stats.BaselineTest, p_before: float, p_after: float) -> tuple[float, float, float]:
    """(P(admit), expected replays uncurtailed, expected replays curtailed) of an own test, exactly: curtailing
    (``curtail``) changes no decision, only where a refusal stops (docs/gate.md, "Curtailed")."""
    from dataclasses import replace

    def runs(t) -> tuple[float, float]:
        ok, bad = own_dist(t, p_before, p_after)
        return sum(ok.values()), sum(k * v for d in (ok, bad) for k, v in d.items())

    p_full, full = runs(replace(test, curtail=False))
    p_cut, cut = runs(replace(test, curtail=True))
    assert abs(p_full - p_cut) < 1e-12, (p_full, p_cut)
    return p_cut, full, cut

"""The gate's suite check: every other scenario, replayed with the candidate, judged against its baseline.

Each suite scenario is replayed with the whole playbook, or, where the host delivers by scope
(``GateOptions.scope_reach``), the admitted rules that can reach it (``reaches``, ``scoped_prompts``); a path-scoped
candidate is not replayed where the scenario's baseline trials never triggered its scope (``by_trace``,
``bot.gate.reach``). Each judged one is judged by
``bot.gate.stats.SuiteTest`` with its baseline on demand (``_judge``); see docs/gate.md section 3. Each entry
carries its scenario's task type, which the report breaks the suite down by (``bot.gate.task_types``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Callable

from bot.errors import BadInput
from bot.gate import reach as reach_mod
from bot.gate import stats
from bot.gate.result import (UNREACHED_ACCEPT, BudgetSpent, GateOptions, Side, SuiteEntry, by_task_type, scoped,
                             trigger_of)
from bot.playbook.render.system_prompt import baseline_prompt, system_prompt
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook
from bot.replay import validate as sv
from bot.scenario import spec as sc
from bot.scenario import suite as suite_mod

# -- scope: which suite scenarios a rule can reach ------------------------------


def reaches(rule: Rule, loaded: sc.LoadedScenario, by_type: bool = True) -> bool:
    """Whether ``rule`` can reach the scenario: its ``task_types`` include the scenario's (or are empty), and its
    ``paths`` match a file of the scenario's fixture (or are empty). Globs as the hosts read them (``*`` crosses
    folders). A path-scoped rule is assumed inert where no file it names exists: true of hosts that load a rule
    only for the files it scopes, not of one file every agent reads whole."""
    from fnmatch import fnmatchcase

    if by_type and not rule.applies_to(loaded.scenario.task_type):
        return False
    if not rule.paths:
        return True
    root = loaded.fixture
    files = (f.relative_to(root).as_posix() for f in root.rglob("*") if f.is_file()) if root.is_dir() else ()
    return any(fnmatchcase(rel, glob) for rel in files for glob in rule.paths)


def scoped_prompts(book: Playbook, candidate: Rule, loaded: sc.LoadedScenario,
                   by_files: bool = True, by_type: bool = True) -> tuple[str, str | None]:
    """(baseline, with the candidate) for one suite scenario: the admitted rules that can reach it, rendered as
    the gate renders them; the second is None when the candidate cannot reach it. A rule admitted with a scope
    that cannot reach the scenario leaves its text, and so its cached baseline, as it was. ``by_files`` False:
    the candidate's ``paths`` are not read against the fixture (its reach is then judged from the baseline
    trials' footprints, ``bot.gate.reach``), only its task types; ``by_type`` False: task types narrow nothing
    (the host gives a task-typed rule to every task)."""
    rules = [r for r in book.admitted() if r.id != candidate.id and reaches(r, loaded, by_type)]
    if by_files:
        ok = reaches(candidate, loaded, by_type)
    else:
        ok = not by_type or candidate.applies_to(loaded.scenario.task_type)
    return book.render_text(rules), book.render_text(rules + [candidate]) if ok else None


def prompts(book: Playbook, candidate: Rule, loaded: sc.LoadedScenario, opts: GateOptions):
    """(before, after, texts): the own scenario's instructions without and with the candidate, and each suite
    scenario's (``scoped_prompts``; None: the whole playbook everywhere). Where the host delivers by scope
    (``bot.gate.result.scoped``), each scenario gets only the admitted rules whose scope reaches it, so its cached trials,
    keyed by those instructions (``trial_key``), survive admissions and retirements in other scopes; the own
    scenario's baseline is then the very one its suite checks read."""
    if not scoped(opts):
        return baseline_prompt(book, candidate), system_prompt(book, candidate), None
    by_files, typed = trigger_of(opts) is None, by_task_type(opts)
    before, after = scoped_prompts(book, candidate, loaded, by_files=False, by_type=typed)
    return (before, after or system_prompt(book, candidate),
            lambda other: scoped_prompts(book, candidate, other, by_files=by_files, by_type=typed))


def by_reach(suite: list[SuiteEntry]) -> str:
    """The scenarios reach skipped, with the largest bound on harm they leave (``bot.gate.reach``)."""
    skipped = [e for e in suite if e.reach_bound is not None]
    if not skipped:
        return ""
    worst = max(e.reach_bound for e in skipped)
    return (f" where the rule can reach; {len(skipped)} scenario(s) whose baselines never triggered its scope "
            f"were not replayed (harm at most {worst:.1%} each, 95%)")


def _unscored_reasons(side: Side) -> str:
    return "; ".join(sorted({t.reason for t in side.trials if t.verdict == "unscored"}))[:300]



def _suite(runner, opts, own, before_text, after_text, suite_dir, progress, k: int | None = None,
           texts: Callable | None = None, candidate: Rule | None = None) -> list[SuiteEntry]:
    """Each suite scenario but ``own`` (None: every one), judged with the candidate against its baseline
    (with ``texts``: each scenario's own prompts, see ``scoped_prompts``; with ``opts.unreached_once`` and the
    ``candidate`` rule, a scenario its scope cannot reach is screened, ``UNREACHED_ACCEPT``)."""
    folders = [f for f in suite_mod.folders(Path(suite_dir)) if own is None or f.resolve() != own.folder.resolve()]
    test = suite_test(opts)

    def one(folder: Path) -> SuiteEntry:
        finding = sv.validate(folder, control=False, policy=opts.replay.simulated)
        if not finding.ok:
            return _broken(finding.scenario, "does not load: " + "; ".join(finding.lines()))
        loaded = sc.load(folder)
        entry = judge_loaded(loaded)
        entry.task_type = loaded.scenario.task_type
        return entry

    how = trigger_of(opts) if texts is not None and candidate is not None and candidate.paths else None

    def judge_loaded(loaded: sc.LoadedScenario) -> SuiteEntry:
        base_text, cand_text = texts(loaded) if texts else (before_text, after_text)
        if cand_text is None:
            return SuiteEntry(loaded.scenario.id, Side("baseline", loaded.scenario.id, outcome="not needed"),
                              note="not judged: the rule's scope (task_types, paths) cannot reach it")
        progress(f"suite `{loaded.scenario.id}`")
        screened = (how is None and opts.unreached_once and candidate is not None
                    and not reaches(candidate, loaded))
        try:
            after = ""
            if how is not None:
                skipped, after = by_trace(runner, opts, test, loaded, base_text, cand_text, candidate, how)
                if skipped is not None:
                    return skipped
            entry = _judge(runner, opts, replace(test, accept_at=UNREACHED_ACCEPT) if screened else test,
                           k or len(folders), loaded, base_text, cand_text)
            if screened:
                entry.note += " (screened: the rule's scope cannot reach it, so one pass clears it)"
            entry.note += after
            return entry
        except BudgetSpent as exc:  # the rest of the suite may still show a regression: that rejects
            return SuiteEntry(loaded.scenario.id, Side("baseline", loaded.scenario.id, outcome="not run"),
                              undecided=True, note=f"not decided: {exc}")
        except BadInput as exc:  # e.g. a sandbox that refuses the fixture: this scenario, not the gate
            return _broken(loaded.scenario.id, "could not be replayed: " + exc.render())

    if len(folders) <= 1:
        return [one(f) for f in folders]
    # Every scenario at once: each waits on its own trials, which share the runner's pool.
    with ThreadPoolExecutor(max_workers=len(folders), thread_name_prefix="gate-suite") as judges:
        futures = [judges.submit(one, f) for f in folders]
        try:
            return [f.result() for f in futures]
        except BaseException:
            runner.close()  # e.g. the budget is spent: stop every other scenario's trials too
            raise


def by_trace(runner, opts: GateOptions, test: stats.SuiteTest, loaded, base_text: str, cand_text: str,
             candidate: Rule, how: str) -> tuple[SuiteEntry | None, str]:
    """Reach from the recorded trace (``bot.gate.reach``): the scenario's baseline trials (cached and shared, the
    same its suite test reads), and whether any did what makes the host load ``candidate`` (path-scoped). None of
    them: the entry that skips it, with its bound on harm. Else (None, a note for the full test's entry).

    A with-rule trial that got the rule although no baseline triggered it (the delivery check says delivered: one
    the cache holds, or `gate.unreached: once`'s one screening trial) sends the scenario to the full test."""
    sid = loaded.scenario.id
    base = runner.fixed(Side("baseline", sid), loaded, base_text, test.baseline_n, opts.replay)
    if base.outcome == "error":
        return None, ""  # the full test says it could not be scored
    found = reach_mod.judge(base.scored, candidate.paths, how)
    if not found.skip:
        return None, f" ({found.note()})"
    with_rule = runner.peek(loaded, cand_text, opts.replay)
    if opts.unreached_once and not with_rule:
        with_rule = runner.fixed(Side("with rule", sid), loaded, cand_text, 1, opts.replay).trials
    got = [t for t in with_rule if t.delivered]
    if got:
        return None, (f" (its {found.trials} baseline trials never triggered the rule's scope, but with-rule trial "
                      f"{got[0].trial} got the rule ({got[0].delivery.get('how') or 'delivered'}): judged in full)")
    return SuiteEntry(sid, base, note=found.note(), reach_trials=found.trials, reach_bound=found.bound), ""


def suite_test(opts: GateOptions) -> stats.SuiteTest:
    return opts.suite if opts.suite_trials is None else replace(opts.suite, baseline_n=opts.suite_trials)


def _broken(name: str, note: str) -> SuiteEntry:
    return SuiteEntry(name, Side("baseline", name, outcome="error"), broken=True, note=note[:600])


def _judge(runner, opts, test: stats.SuiteTest, k: int, loaded, before_text, after_text) -> SuiteEntry:
    """One suite scenario: the candidate's trials until the test decides, against its baseline.

    With ``test.on_demand`` and no whole baseline in the cache, the candidate's trials run first against the
    baseline that would judge them hardest (``SuiteTest.pessimistic``); only if they do not clear it does the
    baseline run, one trial at a time and only until every baseline it could still complete to gives the same
    decision (``SuiteTest.settled``). The decision is the one the whole baseline would have given
    (docs/gate.md, "The baseline on demand").
    """
    sid, n = loaded.scenario.id, test.baseline_n
    entry = SuiteEntry(sid, Side("baseline", sid))
    if test.on_demand and not runner.cached(loaded, before_text, n, opts.replay):
        entry.candidate = runner.sequential(Side("with rule", sid), loaded, after_text,
                                            lambda p, f: test.pessimistic(p, f, k), test.max_n, opts.replay)
        if entry.candidate.outcome == "pass":
            entry.judged, entry.baseline.outcome = True, "not needed"
            entry.note = "no regression (it cleared a baseline that never failed, so its baseline was not run)"
            return entry
        # not cleared, or unscorable with the rule: the baseline tells a broken scenario from one the rule broke
        seen = [t.verdict == "passed" for t in entry.candidate.scored]

        def enough(bp: int, bf: int) -> str:
            done = bp + bf >= n or (entry.candidate.outcome != "error"
                                    and test.settled(bp, bp + n - bp - bf, seen, k) != "continue")
            return "pass" if done else "continue"

        entry.baseline = runner.sequential(entry.baseline, loaded, before_text, enough, n, opts.replay)
    else:
        entry.baseline = runner.fixed(entry.baseline, loaded, before_text, n, opts.replay)
    base = entry.baseline
    if base.outcome == "error":
        entry.broken = True
        entry.note = "not judged: its baseline could not be scored (" + _unscored_reasons(base) + ")"
        return entry
    side = entry.candidate or Side("with rule", sid)
    if base.n < n:  # settled on part of the baseline
        entry.candidate, side.outcome = side, test.settled(base.passes, base.passes + n - base.n,
                                                           [t.verdict == "passed" for t in side.scored], k)
    elif base.passes == 0:
        entry.note = "not judged: it fails with the current playbook too"
        return entry
    else:
        state = test.settle(base.passes, base.n, [t.verdict == "passed" for t in side.scored], k)
        if state == "continue":
            entry.candidate = runner.sequential(side, loaded, after_text,
                                                lambda p, f: test.decide(base.passes, base.n, p, f, k), test.max_n,
                                                opts.replay)
        else:
            entry.candidate, side.outcome = side, state
    entry.judged = True
    if entry.candidate.outcome == "error":
        return _unscorable(entry)
    entry.regressed = entry.candidate.outcome == "fail"
    entry.note = "regressed" if entry.regressed else "no regression"
    return entry


def _unscorable(entry: SuiteEntry) -> SuiteEntry:
    entry.judged = entry.regressed = True
    entry.note = "became unscorable with the rule: " + _unscored_reasons(entry.candidate)
    return entry

"""The admit gate on GitHub: every PR and merge group gets ``replaybook/admit``, a check run or a status.

:class:`PrGate` judges what a PR changes in what agents are told
(:mod:`bot.github.playbook_diff`), against the base commit's playbook read
straight from git objects, under the base commit's config; only a change of
meaning is replayed. Everything else agents read (generated files, hand-written
instructions, removed rules) is judged by :mod:`bot.github.instructions`, and
new or changed suite scenarios are validated, before any replay. :func:`gate_rule_pr` posts the verdict: the check
run with a GitHub App's token (:mod:`bot.github.checks`), else the status; one comment edited in place, ending
with the PR's gate ledger (:mod:`bot.github.ledger`); and the job summary.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from bot._util.credentials import host_redactor
from bot.change import Change, OverlayTree
from bot.errors import BadInput, ReplaybookError
from bot.gate.stats import AutoTest, BaselineTest, PairedTest, SequentialTest
from bot.github import checks, instructions, ledger, playbook_diff
from bot.github.context import GateVerdict, Outcome, RunContext, Status, code, fenced
from bot.github.events import GateRulePr
from bot.github.port import GitHubError, fit_body, marker
from bot.incident import capture as capture_mod
from bot.settings import Environment

GATE_CONTEXT = "replaybook/admit"
GATE_MARKER = marker("gate")
SUMMARY_LIMIT = 1 << 20  # GitHub's cap on one step summary
DEFAULT_AGENT = "builtin"  # the agent the GitHub gate replays with unless a re-gate names one
AGENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")  # the admit workflow checks the same pattern


def gate_test(trials: int | None = None, kind: str = "auto") -> SequentialTest | PairedTest | BaselineTest | AutoTest:
    """The own-scenario test, with at most ``trials`` trials with the rule (``/replaybook replay --trials N``).

    Never above the gate's own budget, and never at a lower pass rate than its own test asks: 4 of 5
    becomes 2 of 2, or 3 of 3. The side without the rule is unchanged. ``kind`` is ``gate.own_test``: the
    paired test takes no trial count (it stops when its test decides, at most ``max_pairs`` pairs); ``auto``
    (the default) picks one per scenario, the paired test for a real model (``stats.AutoTest``).
    """
    if kind == "paired":
        return PairedTest()
    if kind == "baseline":
        return BaselineTest()
    test = SequentialTest()
    if trials is not None:
        n = max(1, min(int(trials), test.after_n))
        test = dataclasses.replace(test, after_n=n, after_min_pass=-(-n * test.after_min_pass // test.after_n))
    return AutoTest(sequential=test) if kind == "auto" else test


def what_runs(agent: str | None, trials: int | None, kind: str = "auto", *, simulated: bool = False) -> str:
    """What a (re-)gate replays, in words, for its report and the command's reply (``simulated``: on the
    simulated model, where ``auto`` gives the sequential test to a scenario whose policy has no chance in it)."""
    test = gate_test(trials, kind)
    if isinstance(test, AutoTest):
        test = test.sequential if simulated else test.paired
    if isinstance(test, PairedTest):
        why = "`gate.own_test: auto`, for a real model" if kind == "auto" else "`gate.own_test: paired`"
        return (f"agent {code(agent or DEFAULT_AGENT, 40)}, the paired test ({why}): at most "
                f"{test.max_pairs} pairs of trials without and with the rule"
                + (f", so `--trials {trials}` does not apply" if trials is not None else ""))
    if isinstance(test, BaselineTest):
        return (f"agent {code(agent or DEFAULT_AGENT, 40)}, the baseline test (`gate.own_test: baseline`): at most "
                f"{test.max_n} trials with the rule against the scenario's cached baseline"
                + (f", so `--trials {trials}` does not apply" if trials is not None else ""))
    return (f"agent {code(agent or DEFAULT_AGENT, 40)}, at most {test.after_n} trial(s) with the rule "
            f"(it admits when at least {test.after_min_pass} pass)")


def check_options(agent: str | None, trials: int | None) -> None:
    """BadInput unless ``agent`` is a plain agent name and ``trials`` a whole number within the gate's budget."""
    if agent is not None and not AGENT_NAME.match(agent):
        raise BadInput(f"--gate-agent {agent[:60]!r}: an agent's name is lowercase letters, digits, `-` and `_` "
                       "(e.g. `claude-code`)")
    budget = SequentialTest().after_n
    if trials is not None and (isinstance(trials, bool) or not 1 <= int(trials) <= budget):
        raise BadInput(f"--gate-trials {trials!r}: give a whole number from 1 to {budget} (the gate's budget)")


def gate_rule_pr(action: GateRulePr, ctx: RunContext) -> list[Outcome]:
    where = f"PR #{action.number}" if action.number else f"merge group {action.head_sha[:12]}"
    # Every PR comes here: the gate passes at once when nothing agents are told changes, and answers
    # error (never success) when a replay is needed but this run has no secrets (a fork).
    runner = ctx.gate or PrGate(ctx.root, ctx.settings)
    try:
        verdict = runner(action)
    except ReplaybookError as exc:
        verdict = GateVerdict("error", f"the gate could not decide: {exc.message}",
                              f"## Replaybook gate: could not decide\n\n{fenced(exc.render())}\n")
    redact = host_redactor()  # whatever a scenario made the harness say, no secret of ours leaves in it
    verdict = dataclasses.replace(verdict, description=redact.text(verdict.description), report=redact.text(verdict.report))
    description = capture_mod.one_liner(verdict.description, 140)
    if ctx.step_summary is not None:  # first: a fork PR's read-only token fails the writes below
        with open(ctx.step_summary, "a", encoding="utf-8") as f:
            f.write(verdict.report[: SUMMARY_LIMIT // 2] + "\n")
    # the bot's own gate comment only: its ledger says whether an earlier gate of this PR was inconclusive
    earlier = ctx.port.find_comment_by_marker(action.number, GATE_MARKER) if action.number is not None else None
    undecided = earlier is not None and any(r.decision == "inconclusive" for r in ledger.read(earlier.body, action.number)[0])
    url = _report_check(action, ctx, verdict, description, undecided)
    if action.number is not None:
        comment = _report_comment(action.number, ctx, verdict, earlier)
        url = url or comment
    status: Status = "failed" if verdict.state == "error" else "done"
    return [Outcome(action.kind, status, f"{where}: {verdict.state}: {description}", url, verdict=verdict.state)]


def _report_check(action: GateRulePr, ctx: RunContext, verdict: GateVerdict, description: str,
                  undecided_before: bool = False) -> str | None:
    """The ``replaybook/admit`` check run with an App token, else (or when GitHub refuses it) the status.

    ``undecided_before``: an earlier gate of this PR was inconclusive, so it may have left a pending status."""
    if ctx.check_runs:
        try:
            url = ctx.port.create_check_run(checks.check_run(verdict, action.head_sha, ctx.run_url, GATE_CONTEXT))
            if verdict.state != "inconclusive" and not undecided_before:
                return url
            # A neutral check run passes a required check, so an inconclusive gate also sets a pending status of the
            # same name: GitHub requires both. The next gate that decides sets that status again, to its verdict.
            ctx.port.set_status(action.head_sha, checks.status_state(verdict.state), GATE_CONTEXT, description,
                                ctx.run_url)
            return url
        except GitHubError as exc:
            if exc.status not in (403, 404):
                raise  # 403/404: the token is not an App's after all; the status below still meets the rule
    ctx.port.set_status(action.head_sha, checks.status_state(verdict.state), GATE_CONTEXT, description, ctx.run_url)
    return None


def _report_comment(number: int, ctx: RunContext, verdict: GateVerdict, earlier) -> str:
    """The gate comment, edited in place, ending with the PR's gate ledger: the earlier gates' records (``earlier``,
    the bot's own gate comment, or None) and this one's."""
    records = ledger.read(earlier.body, number)[0] if earlier is not None else []
    parts = {"report": verdict.report}
    if records or verdict.records:
        parts["ledger"] = ledger.block(number, [*records, *verdict.records])
    return ctx.port.upsert_comment(number, GATE_MARKER, fit_body(parts, trim_first=("report",))).url


class PrGate:
    """The gate on what a PR changes in the admitted playbook, in the checked-out PR head at ``root``.

    What to replay comes from :func:`bot.github.playbook_diff.playbook_change`:
    the rules whose meaning differs from where the PR left the base, by
    parsing, never by git's file status (the workflow must fetch the base
    commit: ``fetch-depth: 0``). The cap, the playbook the rules are judged
    against, the scenarios and the incidents are read with the base commit's
    ``.replaybook.yml``, never the PR's; the playbook itself is the base
    commit's, read from its git objects (:class:`~bot.github.playbook_diff.GitTree`). Without
    secrets (a fork) or without ``ANTHROPIC_API_KEY`` (and no ``replay``
    given) a PR that needs a replay gets ``error``: a simulated replay never
    admits a real rule.
    """

    def __init__(self, root: Path, settings: Any, replay: Any = None, env: Environment | None = None, *,
                 agent: str | None = None, trials: int | None = None):
        check_options(agent, trials)
        self.root, self.settings, self.replay = Path(root), settings, replay
        self.agent, self.trials = agent, trials  # a re-gate's `--agent` and `--trials` (command_run.py)
        self.env = env or Environment()  # the key and ANTHROPIC_BASE_URL, read once by the command
        self.git = playbook_diff.Git(self.root)

    def change(self, base_sha: str) -> playbook_diff.Meaning:
        return playbook_diff.playbook_change(self.git, base_sha)

    def changed_rules(self, base_sha: str) -> list[str]:
        """The head's rule files whose meaning the PR changes (what the gate replays)."""
        return self.change(base_sha).gated

    def base_settings(self, change: playbook_diff.Meaning) -> Any:
        from bot.config import Settings

        return Settings(self.root, change.base_config, None)

    def judged_against(self, base_sha: str, names: list[str], settings: Any = None) -> Any:
        """The base commit's playbook, less each rule the PR rewrites (judged as new), under the base's config.

        It is read from the base commit's git objects, never from a folder the
        PR could have shaped; the scenarios and the incidents are the head's.
        """
        from bot import config as config_mod
        from bot.incident.store import IncidentStore

        settings = settings or self.settings
        folder = settings.config.paths.playbook.strip("/")
        rewritten = Change({f"{folder}/rules/{Path(name).name}": None for name in names})
        tree = OverlayTree(playbook_diff.GitTree(self.git, base_sha), rewritten)
        # The base's org tier too: its replays read what agents read, the org block first (docs/org.md).
        return config_mod.playbook(settings, folder=folder, root=self.root, tree=tree,
                                   incidents=IncidentStore(settings.path("incidents")))

    def __call__(self, action: GateRulePr) -> GateVerdict:
        change = self.change(action.base_sha or "")
        settings = self.base_settings(change)
        if change.refused:
            listed = "\n".join(f"- {code(p, 500)}" for p in change.refused)
            return GateVerdict("failure", "refused: " + change.refused[0],
                               f"## Replaybook gate: refused\n\n{listed}\n\nFix each one as it says: the gate "
                               "judges exactly the text agents are given, and refuses text no replay can prove "
                               "safe (links, URLs, pipes into a shell, encoded blobs, hiding, credentials, CI).\n")
        found = instructions.judge(self.git, change.fork_point, "HEAD", change)
        fails = change.base_config.gate.unproven_instructions == "fail"
        verdict = self._refusal(action, change, settings, found, fails) or self._verdict(action, change, settings)
        return _with_unproven(verdict, found.unproven, fails)

    def _refusal(self, action: GateRulePr, change: playbook_diff.Meaning, settings: Any,
                 found: instructions.Findings, fails: bool) -> GateVerdict | None:
        """A failure decided before any replay (what agents read, the cap, the suite's scenarios), or None."""
        failing = found.failing(fails)
        if failing:
            return GateVerdict("failure", f"refused: {failing[0]}", _refusal(found))
        cap = settings.cap
        if change.head_count > cap:
            # Two PRs that each fit can overflow together: a merge group is checked on the merged result.
            what = "the merged result of this merge group" if action.merge_group else "this PR"
            return GateVerdict("failure", f"{change.head_count} rules past the cap of {cap}",
                               f"## Replaybook gate: over the cap\n\nWith {what} the playbook holds "
                               f"{change.head_count} admitted rules; the cap is {cap}. Merge rule PRs one at a time "
                               "(each retires the coldest rule it displaces), or run distill again to refresh this "
                               "PR against the default branch.\n")
        unsound = self._unsound_scenarios(change, settings)
        if unsound:
            listed = "\n".join(f"- {code(p, 500)}" for p in unsound)
            return GateVerdict("failure", f"refused: {unsound[0]}",
                               "## Replaybook gate: unsound scenario\n\nThis PR adds or changes suite scenarios, "
                               "and the gate validates each one (`replaybook scenario validate`, with the do-nothing "
                               "control) before it proves or judges any rule:\n\n" + listed + "\n")
        return None

    def _unsound_scenarios(self, change: playbook_diff.Meaning, settings: Any) -> list[str]:
        """Why each new or changed suite scenario cannot prove a rule: its files, then the do-nothing control."""
        import dataclasses

        from bot.replay import isolation
        from bot.replay import validate as sv
        from bot.replay.engine import run_trial
        from bot.scenario import spec as scenario_mod

        if not change.scenarios:
            return []
        sandbox = self.replay.sandbox if self.replay is not None else settings.config.replay.sandbox
        if isolation.backend(sandbox).name == "none":
            return ["the do-nothing control of a new or changed scenario runs its fixture's code, and the replay "
                    "is set to `--sandbox none`; the gate never runs a PR's fixture unisolated (use bwrap or docker)"]
        control = dataclasses.replace(sv.CONTROL, sandbox=sandbox)
        out: list[str] = []
        for folder in change.scenarios:
            finding = sv.validate(self.root / folder, control=False, policy=False)
            problems = finding.problems + finding.unsound
            if not problems:
                loaded = scenario_mod.load(self.root / folder)
                problems = sv.control_problems(loaded, run_trial(loaded, "", control, 0, sv.DoNothingAgent()))
            out += [f"{folder}: {p}" if not p.startswith(str(self.root)) else p.replace(str(self.root) + "/", "")
                    for p in problems]
        return out

    def _verdict(self, action: GateRulePr, change: playbook_diff.Meaning, settings: Any) -> GateVerdict:
        if not change.gated:
            return _nothing_to_replay(change)
        if not action.secrets:
            why = "a fork" if action.fork else "a Dependabot PR"
            return GateVerdict("error", "replay could not run: no secrets on fork PRs",
                               f"## Replaybook gate: could not run\n\nThis is {why}, so the workflow gets no "
                               "secrets and the replay cannot run. The gate reports `error`, never success. A "
                               "maintainer can push the branch to this repository to run it.\n\n"
                               + _listing(change))
        return self._replay(action, change, settings)

    def _replay(self, action: GateRulePr, change: playbook_diff.Meaning, settings: Any) -> GateVerdict:
        from bot.config import for_agent, replay_options
        from bot.gate import decision as gate_mod
        from bot.gate import report as gate_report
        from bot.replay import isolation

        agents = list(settings.config.replay.agents) or [DEFAULT_AGENT]
        if self.agent is not None and self.agent not in agents:  # the base's list: a PR cannot add to it
            raise BadInput(f"--gate-agent: `{self.agent}` is not one of the agents the gate runs here "
                           f"({', '.join(agents)}; `replay.agents` in the base's `.replaybook.yml`)")
        replay = self.replay
        if replay is None:
            key_var, key, _ = for_agent(self.env, self.agent or DEFAULT_AGENT)
            if not key:
                raise BadInput(f"{key_var} is not set, so the replay cannot run")
            # The base's settings: a PR cannot lift the sandbox, nor move where runs go.
            replay = replay_options(settings, self.env, model=settings.config.models.agent,
                                    **({"agent": self.agent} if self.agent else {}))
        elif self.agent is not None:
            replay = dataclasses.replace(replay, agent=self.agent)
        if isolation.backend(replay.sandbox).name == "none":
            return GateVerdict("failure", "the gate refuses to replay without a sandbox",
                               "## Replaybook gate: no sandbox\n\nThe replay was asked to run with `--sandbox none` "
                               "(`REPLAYBOOK_SANDBOX` or `replay.sandbox` in `.replaybook.yml`). A rule PR's fixture is "
                               "code anyone who can push a branch controls, and it would run beside the API key, so "
                               "the gate never admits from an unisolated replay. Use `bwrap` (see docs/install.md) "
                               "or `docker`.\n")
        from bot.gate import ledger as gate_log

        opts = gate_mod.GateOptions(replay=replay, test=gate_test(self.trials, settings.config.gate.own_test),
                                    **settings.config.gate.options())
        results, notes = [], []
        book = self.judged_against(action.base_sha or "", change.gated, settings)
        for name in change.gated:
            results.append(gate_mod.run_gate(book, self.root / name, settings.path("scenarios"), opts))
            notes += checks.annotations(results[-1], self.root, name, settings.path("scenarios"))
        decisions = {r.decision for r in results}
        state = ("error" if "error" in decisions else "failure" if "reject" in decisions
                 else "inconclusive" if "inconclusive" in decisions else "success")
        word = {"success": "admit", "failure": "reject", "error": "could not decide",
                "inconclusive": "inconclusive (the budget ended first)"}[state]
        ids = ", ".join(f"{r.rule_id} {r.decision}" for r in results)
        report = "\n\n".join(gate_report.markdown(r, opts.test) for r in results)
        if self.agent is not None or self.trials is not None:  # a re-gate's options: say what it replayed
            report = (f"Re-gated as asked: {what_runs(self.agent, self.trials, settings.config.gate.own_test, simulated=replay.simulated)}."
                      f"\n\n{report}")
        redact = host_redactor().text  # a trial's commands are the agent's: no secret of ours leaves in them
        return GateVerdict(state, f"{word}: {ids}", report, annotations=tuple(notes),
                           records=tuple(gate_log.record_of(r).model_copy(update={"detail": ledger.detail_of(r, redact)})
                                         for r in results))


def _refusal(found: instructions.Findings) -> str:
    parts = ["## Replaybook gate: refused", ""]
    if found.differs:
        parts += ["**Generated content that is not its rendering.** Replaybook writes these from "
                  "`playbook/rules/`; agents would read text no replay proved:", "",
                  *(f"- {code(p, 500)}" for p in found.differs), ""]
    if found.deleted:
        parts += ["**Admitted rules removed by hand:**", "", *(f"- {code(p, 500)}" for p in found.deleted), ""]
    if not found.differs and not found.deleted:
        parts += ["Only instructions no replay proved (listed below), and the base's config says "
                  "`gate.unproven_instructions: fail`.", ""]
    return "\n".join(parts).rstrip("\n") + "\n"


def _unproven_lines(unproven: list[str], fails: bool) -> list[str]:
    verdict = ("`gate.unproven_instructions: fail` in the base's `.replaybook.yml` makes them fail the gate; merge "
               "them in a PR a maintainer reviews as code, with that setting lifted for it" if fails else
               "reported, not failed (`gate.unproven_instructions: report`, the default); review them as you "
               "would code, or set `fail`")
    return [f"**{instructions.UNPROVEN[0].upper()}{instructions.UNPROVEN[1:]}** ({verdict}):", "",
            *(f"- {code(p, 500)}" for p in unproven), ""]


def _with_unproven(verdict: GateVerdict, unproven: list[str], fails: bool) -> GateVerdict:
    """The verdict with the instructions no replay proved listed at its end (and counted in its description)."""
    if not unproven:
        return verdict
    report = verdict.report.rstrip("\n") + "\n\n" + "\n".join(_unproven_lines(unproven, fails))
    what = "fail" if fails else "reported"
    description = f"{verdict.description}; {len(unproven)} unproven instruction file(s) {what}"
    return dataclasses.replace(verdict, description=description, report=report)  # its annotations and records kept


def _listing(change: playbook_diff.Meaning) -> str:
    return "\n".join(f"- {code(path, 200)}: {code(change.why.get(path, 'changed'), 200)}" for path in change.gated)


def _nothing_to_replay(change: playbook_diff.Meaning) -> GateVerdict:
    if change.bookkeeping:
        description = "no rule changed (bookkeeping only)"
        detail = "Only `last_hit` moved on " + ", ".join(change.bookkeeping) + ": nothing to replay."
    else:
        description = "no rule changed"
        detail = "No admitted rule, and no scenario a rule replays, changed: nothing to replay."
    if change.removed:
        detail += " No longer admitted: " + ", ".join(change.removed) + "."
    return GateVerdict("success", description, f"## Replaybook gate\n\n{detail}\n")

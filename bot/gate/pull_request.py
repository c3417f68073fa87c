"""The gate on a rule pull request: what it changes in what agents are told, judged, and one verdict back.

:class:`PrGate` judges what a PR changes in what agents are told (:mod:`bot.gate.playbook_diff`), against the
base commit's playbook read straight from git objects, under the base commit's config; only a change of
meaning is replayed. Everything else agents read (generated files, hand-written instructions, removed rules)
is judged by :mod:`bot.gate.instructions`, and new or changed suite scenarios are validated, before any
replay. It returns a :class:`~bot.gate.verdict.GateVerdict`; it reads nothing from GitHub and posts nothing
(``bot.github.gate`` reads the event and posts the verdict).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Protocol

from bot._util.credentials import host_redactor
from bot._util.text_safety import code
from bot.change import Change, OverlayTree
from bot.errors import BadInput
from bot.gate import instructions, playbook_diff
from bot.gate import verdict as verdicts
from bot.gate.options import DEFAULT_AGENT, agents, check_options, options, what_runs
from bot.gate.verdict import GateVerdict, Judged
from bot.settings import Environment


class RulePr(Protocol):
    """What the gate reads of a rule PR's event (``bot.github.events.GateRulePr``)."""

    base_sha: str | None
    merge_group: bool
    secrets: bool
    fork: bool


class PrGate:
    """The gate on what a PR changes in the admitted playbook, in the checked-out PR head at ``root``.

    What to replay comes from :func:`bot.gate.playbook_diff.playbook_change`:
    the rules whose meaning differs from where the PR left the base, by
    parsing, never by git's file status (the workflow must fetch the base
    commit: ``fetch-depth: 0``). The cap, the playbook the rules are judged
    against, the scenarios and the incidents are read with the base commit's
    ``.replaybook.yml``, never the PR's; the playbook itself is the base
    commit's, read from its git objects (:class:`~bot.gate.playbook_diff.GitTree`). Without
    secrets (a fork) or without ``ANTHROPIC_API_KEY`` (and no ``replay``
    given) a PR that needs a replay gets ``error``: a simulated replay never
    admits a real rule.
    """

    def __init__(self, root: Path, settings: Any, replay: Any = None, env: Environment | None = None, *,
                 agent: str | None = None, trials: int | None = None):
        check_options(agent, trials)
        self.root, self.settings, self.replay = Path(root), settings, replay
        self.agent, self.trials = agent, trials  # a re-gate's `--agent` and `--trials` (bot.github.command_run)
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

    def __call__(self, action: RulePr) -> GateVerdict:
        change = self.change(action.base_sha or "")
        settings = self.base_settings(change)
        if change.refused:
            return verdicts.refused_text(change)
        found = instructions.judge(self.git, change.fork_point, "HEAD", change)
        fails = change.base_config.gate.unproven_instructions == "fail"
        verdict = self._refusal(action, change, settings, found, fails) or self._verdict(action, change, settings)
        return verdicts.with_unproven(verdict, found.unproven, fails)

    def _refusal(self, action: RulePr, change: playbook_diff.Meaning, settings: Any,
                 found: instructions.Findings, fails: bool) -> GateVerdict | None:
        """A failure decided before any replay (what agents read, the cap, the suite's scenarios), or None."""
        failing = found.failing(fails)
        if failing:
            return GateVerdict("failure", f"refused: {failing[0]}", verdicts.refusal(found))
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
        from bot.replay import validate as sv
        from bot.replay.engine import run_trial
        from bot.replay.sandbox import isolation
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
                problems += sv.passable_problems(loaded, sandbox=sandbox)  # the reference solution must pass
            out += [f"{folder}: {p}" if not p.startswith(str(self.root)) else p.replace(str(self.root) + "/", "")
                    for p in problems]
        return out

    def _verdict(self, action: RulePr, change: playbook_diff.Meaning, settings: Any) -> GateVerdict:
        if not change.gated:
            return verdicts.nothing_to_replay(change)
        if not action.secrets:
            why = "a fork" if action.fork else "a Dependabot PR"
            return GateVerdict("error", "replay could not run: no secrets on fork PRs",
                               f"## Replaybook gate: could not run\n\nThis is {why}, so the workflow gets no "
                               "secrets and the replay cannot run. The gate reports `error`, never success. A "
                               "maintainer can push the branch to this repository to run it.\n\n"
                               + verdicts.listing(change))
        return self._replay(action, change, settings)

    def _replay(self, action: RulePr, change: playbook_diff.Meaning, settings: Any) -> GateVerdict:
        from bot.config import for_agent
        from bot.gate import decision as gate_mod
        from bot.gate import ledger as gate_log
        from bot.gate import report as gate_report
        from bot.replay.sandbox import isolation

        allowed = agents(settings)
        if self.agent is not None and self.agent not in allowed:  # the base's list: a PR cannot add to it
            raise BadInput(f"--gate-agent: `{self.agent}` is not one of the agents the gate runs here "
                           f"({', '.join(allowed)}; `replay.agents` in the base's `.replaybook.yml`)")
        if self.replay is None:
            key_var, key, _ = for_agent(self.env, self.agent or DEFAULT_AGENT)
            if not key and settings.config.models.agent != "local":  # `local`: the local model, no key
                raise BadInput(f"{key_var} is not set, so the replay cannot run")
        # The base's settings: a PR cannot lift the sandbox, nor move where runs go.
        opts = options(settings, self.env, default_agent=DEFAULT_AGENT, agent=self.agent, replay=self.replay,
                       own_trials=self.trials)
        if isolation.backend(opts.replay.sandbox).name == "none":
            return GateVerdict("failure", "the gate refuses to replay without a sandbox",
                               "## Replaybook gate: no sandbox\n\nThe replay was asked to run with `--sandbox none` "
                               "(`REPLAYBOOK_SANDBOX` or `replay.sandbox` in `.replaybook.yml`). A rule PR's fixture is "
                               "code anyone who can push a branch controls, and it would run beside the API key, so "
                               "the gate never admits from an unisolated replay. Use `bwrap` (see docs/install.md) "
                               "or `docker`.\n")
        judged: list[Judged] = []
        book = self.judged_against(action.base_sha or "", change.gated, settings)
        scenarios = settings.path("scenarios")
        for name in change.gated:
            judged.append(Judged(name, gate_mod.run_gate(book, self.root / name, scenarios, opts), self.root, scenarios))
        report = "\n\n".join(gate_report.markdown(j.result, opts.test) for j in judged)
        if self.agent is not None or self.trials is not None:  # a re-gate's options: say what it replayed
            report = (f"Re-gated as asked: {what_runs(self.agent, self.trials, settings.config.gate.own_test, simulated=opts.replay.simulated)}."
                      f"\n\n{report}")
        redact = host_redactor().text  # a trial's commands are the agent's: no secret of ours leaves in them
        records = tuple(gate_log.record_of(j.result).model_copy(update={"detail": gate_log.detail_of(j.result, redact)})
                        for j in judged)
        return verdicts.of_results(judged, report, records)

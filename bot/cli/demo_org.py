"""``replaybook demo --org``: the organisation's tier, offline, on three members made of the bundled scenarios.

Three member repositories (api, web, cli) share the monorepo test mistake and the targeted-tests habit;
cli also has a shared function whose change must be followed by the whole suite. Two org rules are
gated in every member: the package-local test config rule is proven in all three and admitted into the
org tier; "run only that module's tests" is fixed in each member's own scenario but regresses cli's
whole-suite scenario, so the org gate refuses it, naming cli. Then api renders the tier before its own
rules. Every model answer comes from the SIMULATED model (scripted; not a real LLM).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Callable

from bot import config as config_mod
from bot._util import bundled, yamlfile
from bot.gate import org as org_gate
from bot.gate.decision import GateOptions
from bot.playbook import org as org_mod
from bot.playbook import rule as rules_mod
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook
from bot.replay import ReplayOptions

Say = Callable[[str], None]
MEMBERS = {
    "api": ["monorepo-test-cwd", "targeted-tests"],
    "web": ["monorepo-test-cwd", "targeted-tests", "lint-disable"],
    "cli": ["monorepo-test-cwd", "targeted-tests", "whole-suite-after-change"],
}
#: the org rules to gate: the bundled rule's text, proven by that bundled scenario in every member
PROPOSALS = {"rule-0001": "monorepo-test-cwd", "rule-0002": "targeted-tests"}


@dataclass
class OrgOutcome:
    admitted: list[str]
    refused: dict[str, str]
    org: Path


def build(workspace: Path) -> dict[str, Path]:
    """The org repository and its three members under ``workspace``; name -> folder."""
    source = bundled.scenarios_dir()
    roots = {}
    for name, scenarios in MEMBERS.items():
        root = workspace / name
        for scenario in scenarios:
            shutil.copytree(source / scenario, root / "scenarios" / scenario,
                            ignore=shutil.ignore_patterns("__pycache__", "rule.yaml"))
        (root / "playbook" / "rules").mkdir(parents=True)
        (root / ".replaybook.yml").write_text(f"# demo member {name}\norg: {{path: ../org}}\n", encoding="utf-8")
        roots[name] = root
    org = workspace / "org"
    members = "".join(f"    {n}: {{path: ../{n}}}\n" for n in MEMBERS)
    (org / "playbook" / "rules").mkdir(parents=True)
    (org / "playbook" / "proposed").mkdir()
    (org / ".replaybook.yml").write_text(f"# demo org repository\norg_tier:\n  members:\n{members}",
                                         encoding="utf-8")
    for rule_id, scenario in PROPOSALS.items():
        text = rules_mod.load(source / scenario / "rule.yaml", named_by_id=False).rule
        rule = Rule(id=rule_id, rule=text, replays={n: f"scenarios/{scenario}" for n in MEMBERS},
                    cites=[f"{n}/demo" for n in MEMBERS], created=date(2026, 8, 3))
        (org / "playbook" / "proposed" / f"{rule_id}.yaml").write_text(
            yamlfile.dump(rule.to_yaml_data(), kind="rule"), encoding="utf-8")
    roots["org"] = org
    return roots


def run(workspace: Path, say: Say, today: date, progress: Say = lambda _: None) -> OrgOutcome:
    roots = build(workspace)
    org_root = roots.pop("org")
    settings = config_mod.load(org_root)
    book = Playbook(settings.path("playbook"), root=org_root, cap=settings.cap)
    opts = GateOptions(replay=ReplayOptions(runs_dir=workspace / ".replaybook" / "traces"), jobs=2, suite_trials=1,
                       cache_dir=workspace / ".replaybook" / "cache")
    say(f"Org repository `{org_root}` (cap {settings.cap}), members: {', '.join(roots)}. Every model answer comes "
        "from the SIMULATED model (scripted; not a real LLM).\n")
    outcome = OrgOutcome([], {}, org_root)
    for rule_id in PROPOSALS:
        path = book.dir("proposed") / f"{rule_id}.yaml"
        candidate = org_gate.load_candidate(path)
        members = org_gate.members_of(candidate, list(roots.values()), book.admitted(), min_members=3,
                                      source=org_root.name)
        result = org_gate.run(candidate, members, opts, ["builtin"], lambda msg: progress(f"… {rule_id}: {msg}"))
        verdict = org_gate.document(result, opts)
        say(org_gate.markdown(verdict))
        if verdict["decision"] == "admit":
            book.admit(path, today)
            outcome.admitted.append(rule_id)
        else:
            outcome.refused[rule_id] = verdict["reason"]
    api = roots["api"]
    api_settings = config_mod.load(api)
    member = Playbook(api_settings.path("playbook"), root=api, cap=api_settings.cap,
                      org=config_mod.org_tier(api_settings))
    member.render()
    say(f"## What agents in `api` read now (`{member.rendered_path}`)\n")
    say("```markdown\n" + member.rendered_path.read_text(encoding="utf-8") + "```\n")
    say(f"The org block comes first and stays within api's org budget of {member.org.budget_bytes} bytes "
        f"(a quarter of the smallest host limit; {org_mod.FALLBACK_LIMIT // 4} with no render target).")
    return outcome

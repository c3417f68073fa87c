"""The offline demo: the parts of the loop that exist, on bundled material.

It builds a scratch repository from the bundled scenarios and walks it
through capture (the incident store), proposal checks, the capped playbook,
citation hits, rendering and injection. Every step does the real work on
real files; nothing here is canned output.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import date
from pathlib import Path

from bot import bundled, records
from bot.markdown import table
from bot import rule as rules_mod
from bot import scenario as scenario_mod
from bot.incident import Incident, IncidentStore
from bot.playbook import Playbook

Say = Callable[[str], None]
DEMO_CAP = 3  # below the four bundled rules, so the demo shows a retirement


def build_workspace(workspace: Path) -> Path:
    """Copy the bundled scenarios into an empty repository at ``workspace``."""
    shutil.copytree(bundled.scenarios_dir(), workspace / "scenarios", ignore=shutil.ignore_patterns("__pycache__"))
    (workspace / ".replaybook.yml").write_text(f"# demo workspace\ncap: {DEMO_CAP}\n", encoding="utf-8")
    return workspace


def run(workspace: Path, say: Say, today: date) -> Path:
    """Walk the loop on ``workspace`` (an empty folder); return the playbook folder."""
    build_workspace(workspace)
    store = IncidentStore(workspace / "incidents")
    book = Playbook(workspace / "playbook", root=workspace, cap=DEMO_CAP, incidents=store)
    scenario_dirs = sorted(p for p in (workspace / "scenarios").iterdir() if (p / "scenario.yaml").is_file())

    say("## 1. Capture: incidents as belief deltas\n")
    rows, again = [], None
    for folder in scenario_dirs:
        for path in sorted((folder / "incidents").glob("*.yaml")):
            incident = records.load(Incident, path, what="incident")
            stored, _ = store.add(incident)
            again = again or stored
            rows.append([stored.id, stored.failure_class, stored.believed, stored.actual])
    say(table(["incident", "class", "believed", "actual"], rows))
    _, created = store.add(again)
    say(f"\nStored {len(rows)} incidents in `incidents/`. Capturing `{again.id}` again stored "
        f"{'a copy (bug!)' if created else 'nothing: its source key is already there'}.\n")

    say("## 2. Proposals: cheap checks before any replay\n")
    proposed = book.dir("proposed")
    proposed.mkdir(parents=True, exist_ok=True)
    rows = []
    for folder in scenario_dirs:
        rule = rules_mod.load(folder / "rule.yaml", named_by_id=False)
        loaded = scenario_mod.load(workspace / rule.replay)
        missing = [c for c in rule.cites if c not in store.ids()]
        sentences = len(rules_mod.sentences(rule.rule))
        checks = ", ".join(scenario_mod.check_name(c) for c in loaded.scenario.pass_if)
        (proposed / f"{rule.id}.yaml").write_text((folder / "rule.yaml").read_text(encoding="utf-8"), encoding="utf-8")
        rows.append([rule.id, f"{sentences}/2", len(rule.cites) - len(missing), "yes" if rule.provisional else "no", checks])
    say(table(["rule", "sentences", "cited incidents found", "provisional", "replay checks"], rows))
    say("\nEvery proposal has at most two sentences, cites stored incidents and ships a scenario with structured checks.\n")

    say(f"## 3. Playbook: admission under a cap of {DEMO_CAP}\n")
    say("> The replay gate is not built yet (issue #4), so this demo admits the proposals **without replay**\n"
        "> to show the playbook's own mechanics. Nothing here claims a rule was proven.\n")
    for path in sorted(proposed.glob("*.yaml")):
        target = book.dir("rules") / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
        retired = book.retire_over_cap(on=today)
        for r in retired:
            say(f"- admitting {path.stem} passed the cap: retired coldest {r.id} to `playbook/archive/` "
                f"(last hit {r.last_hit or 'never'}, created {r.created})")
    book.render()
    store.mark_resolved(sorted({c for r in book.admitted() for c in r.cites}), "rule")
    say("")
    say(table(["admitted", "last hit", "task types", "rule"],
                 [[r.id, r.last_hit or "never", ", ".join(r.task_types) or "all", r.rule] for r in book.admitted()]))

    say("\n## 4. Hits: an agent cites the rules it applied\n")
    transcript = ("(a simulated agent's final message) Ran the tests from packages/api as the playbook says "
                  f"[{book.admitted()[0].id}] and left the lint config alone [rule-0099].")
    hits = book.hit(transcript, today)
    say(f"`replaybook playbook hit` on a transcript: last_hit of {', '.join(hits.hit)} set to {today}; "
        f"{', '.join(hits.not_admitted) or 'no'} citation(s) of rules not in the playbook ignored.\n")

    say("## 5. What the next agent reads\n")
    claude = workspace / "CLAUDE.md"
    claude.write_text("# Project notes\n\nWritten by people; Replaybook keeps only its marked section.\n", encoding="utf-8")
    book.sync_section(claude)
    task_type = "testing"
    say(f"`replaybook playbook inject --task-type {task_type}`:\n")
    say("```text\n" + book.inject(task_type).rstrip() + "\n```\n")
    problems = book.check([claude])
    say(f"`replaybook playbook check`: {'ok' if not problems else 'FAILED: ' + '; '.join(problems)}; "
        f"{len(store.all())} incidents, {sum(1 for i in store.all() if i.unresolved)} unresolved.\n")
    return book.folder

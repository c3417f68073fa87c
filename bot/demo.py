"""The offline demo: the loop so far, on bundled material.

It builds a scratch repository from the bundled scenarios and walks it
through capture (the incident store), proposal checks, replays of each
proposal without and with its rule (a real agent loop in a real sandbox,
answered by the SIMULATED model), the capped playbook, citation hits,
rendering and injection. Every step does the real work on real files.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

from bot import bundled, records
from bot import rule as rules_mod
from bot import scenario as scenario_mod
from bot.incident import Incident, IncidentStore
from bot.markdown import table
from bot.playbook import Playbook
from bot.replay.engine import SCRIPTED, ReplayOptions, TrialResult, run_trial

Say = Callable[[str], None]
DEMO_CAP = 3  # below the four bundled rules, so the demo shows a retirement
SIMULATED = "SIMULATED model: scripted answers from each scenario's policy.yaml, not a real LLM"


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
    capture(store, scenario_dirs, say)
    propose(workspace, book, store, scenario_dirs, say)
    proven = replay(workspace, book, say)
    admit(book, store, proven, today, say)
    hits(book, today, say)
    inject(workspace, book, store, say)
    return book.folder


def capture(store: IncidentStore, scenario_dirs: list[Path], say: Say) -> None:
    say("## 1. Capture: incidents as belief deltas\n")
    rows, first = [], None
    for folder in scenario_dirs:
        for path in sorted((folder / "incidents").glob("*.yaml")):
            stored, _ = store.add(records.load(Incident, path, what="incident"))
            first = first or stored
            rows.append([stored.id, stored.failure_class, stored.believed, stored.actual])
    say(table(["incident", "class", "believed", "actual"], rows))
    _, created = store.add(first)
    say(f"\nStored {len(rows)} incidents in `incidents/`. Capturing `{first.id}` again stored "
        f"{'a copy (bug!)' if created else 'nothing: its source key is already there'}.\n")


def propose(workspace: Path, book: Playbook, store: IncidentStore, scenario_dirs: list[Path], say: Say) -> None:
    say("## 2. Proposals: cheap checks before any replay\n")
    proposed = book.dir("proposed")
    proposed.mkdir(parents=True, exist_ok=True)
    rows = []
    for folder in scenario_dirs:
        rule = rules_mod.load(folder / "rule.yaml", named_by_id=False)
        shutil.copyfile(folder / "rule.yaml", proposed / f"{rule.id}.yaml")
        book.vet(proposed / f"{rule.id}.yaml")  # cites stored incidents, scenario loads, id unused
        loaded = scenario_mod.load(workspace / rule.replay)
        checks = ", ".join(scenario_mod.check_name(c) for c in loaded.scenario.pass_if)
        rows.append([rule.id, f"{len(rules_mod.sentences(rule.rule))}/2", len(rule.cites),
                     "yes" if rule.provisional else "no", checks])
    say(table(["rule", "sentences", "cited incidents", "provisional", "replay checks"], rows))
    say("\nEach proposal has at most two sentences, cites stored incidents and ships a scenario with structured checks.\n")


def replay(workspace: Path, book: Playbook, say: Say) -> set[str]:
    """Replay each proposal's scenario without and with its rule; return the ids that discriminate."""
    say("## 3. Replay: does each rule change what the agent does?\n")
    say(f"> Offline, the agent talks to the {SIMULATED}. The full admit gate (trials, statistics,\n"
        "> the whole suite) is issue #4; here each proposal gets one replay without and one with its rule.\n")
    opts = ReplayOptions(agent="builtin", model=SCRIPTED, runs_dir=workspace / ".replaybook" / "traces")
    base = book.render_text([])
    pairs = []
    for path in sorted(book.dir("proposed").glob("*.yaml")):
        rule = rules_mod.load(path)
        loaded = scenario_mod.load(workspace / rule.replay)
        pairs.append((rule, loaded, base, base + f"\n- [{rule.id}] {rule.rule}\n"))
    jobs = [(loaded, text) for _, loaded, *texts in pairs for text in texts]
    say(f"Running {len(jobs)} replays, two at a time (about half a minute)…\n")
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda job: run_trial(job[0], job[1], opts, 0), jobs))
    rows, proven = [], set()
    for (rule, loaded, *_), without, with_ in zip(pairs, results[::2], results[1::2]):
        works = without.verdict == "failed" and with_.verdict == "passed"
        proven |= {rule.id} if works else set()
        rows.append([rule.id, loaded.scenario.id, f"{without.verdict}: {_caught(without)}", with_.verdict,
                     "discriminates" if works else "does not discriminate"])
    say(table(["rule", "scenario", "without the rule", "with it", "replay"], rows, width=80))
    tokens = sum(r.input_tokens + r.output_tokens for r in results)
    say(f"\n{len(results)} replays, {tokens:,} tokens, ${sum(r.cost_usd for r in results):.2f} "
        "(a simulated estimate). Traces are in `.replaybook/traces/`.\n")
    return proven


def _caught(result: TrialResult) -> str:
    return result.failed_checks[0].check if result.failed_checks else result.reason


def admit(book: Playbook, store: IncidentStore, proven: set[str], today: date, say: Say) -> None:
    say(f"## 4. Playbook: admission under a cap of {DEMO_CAP}\n")
    for path in sorted(book.dir("proposed").glob("*.yaml")):
        if path.stem not in proven:
            say(f"- {path.stem} stays in `playbook/proposed/`: its replay did not discriminate")
            continue
        target = book.dir("rules") / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
        for r in book.retire_over_cap(on=today):
            say(f"- admitting {path.stem} passed the cap: retired the coldest, {r.id}, to `playbook/archive/` "
                f"(last hit {r.last_hit or 'never'}, created {r.created})")
    book.render()
    store.mark_resolved(sorted({c for r in book.admitted() for c in r.cites}), "rule")
    say("")
    say(table(["admitted", "last hit", "task types", "rule"],
              [[r.id, r.last_hit or "never", ", ".join(r.task_types) or "all", r.rule] for r in book.admitted()]))


def hits(book: Playbook, today: date, say: Say) -> None:
    say("\n## 5. Hits: an agent cites the rules it applied\n")
    first = book.admitted()[0].id
    transcript = ("(a SIMULATED agent's final message) Ran the tests from packages/api as the playbook says "
                  f"[{first}] and left the lint config alone [rule-0099].")
    found = book.hit(transcript, today)
    say(f"`replaybook playbook hit` on a transcript: last_hit of {', '.join(found.hit)} set to {today}; "
        f"{', '.join(found.not_admitted) or 'no'} citation(s) of rules not in the playbook ignored.\n")


def inject(workspace: Path, book: Playbook, store: IncidentStore, say: Say) -> None:
    say("## 6. What the next agent reads\n")
    claude = workspace / "CLAUDE.md"
    claude.write_text("# Project notes\n\nWritten by people; Replaybook keeps only its marked section.\n", encoding="utf-8")
    book.sync_section(claude)
    say("`replaybook playbook inject --task-type testing`:\n")
    say("```text\n" + book.inject("testing").rstrip() + "\n```\n")
    problems = book.check([claude])
    incidents = store.all()
    say(f"`replaybook playbook check`: {'ok' if not problems else 'FAILED: ' + '; '.join(problems)}; "
        f"{len(incidents)} incidents, {sum(i.unresolved for i in incidents)} unresolved.\n")

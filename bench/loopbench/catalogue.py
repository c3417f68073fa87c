"""The failure modes the stream draws from: bundled scenarios, the benchmark's own, and a generated tail.

A mode is one scenario plus what the SIMULATED models need to play it: the
rule that fixes it (the good proposal), the belief delta the analyst states
when it fails, and its place in the stream (recurring, occasional, one-off,
done right).
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import yaml

from bot._util import bundled, records
from bot.incident.store import Incident
from bot.playbook import rule as rules_mod
from bot.playbook.rule import Rule
from bot.replay.gateway.policy import load_policy
from bot.scenario import spec as sc

HERE = Path(__file__).resolve().parent
BENCH_SCENARIOS = HERE / "scenarios"
VICTIM = "whole-suite-after-change"  # the done-right scenario a harmful rule breaks
HARM_PHRASE = "run only that module's tests"  # what its policy branches on (bundled rule-0005's words)


@dataclass(frozen=True)
class Mode:
    id: str
    kind: str  # recurring | occasional | oneoff | done-right
    task: str
    rule: str  # the rule a good distiller proposes
    branch_on: str
    believed: str = ""
    actual: str = ""
    failure_class: str = "wrong_assumption"
    harmful_rule: bool = False  # its own rule breaks another scenario (targeted-tests)
    source: Path | None = None  # where its folder is copied from; None: generated
    task_type: str = ""  # its scenario's task_type: what a rule scoped with `task_types` reaches
    files: tuple[str, str] = ()  # a one-off's (file the task edits, file it must keep)


BUNDLED_KINDS = {"monorepo-test-cwd": "recurring", "lint-disable": "recurring", "dynamic-module-delete": "recurring",
                 "flaky-network-retry": "recurring", "targeted-tests": "occasional", VICTIM: "done-right"}


def _branch_on(folder: Path) -> str:
    return load_policy(folder / "policy.yaml").branch_on


def _bundled(sid: str, kind: str) -> Mode:
    folder = bundled.scenarios_dir() / sid
    rule = rules_mod.load(folder / "rule.yaml", named_by_id=False)
    first = sorted((folder / "incidents").glob("*.yaml"))[0]
    incident = records.load(Incident, first, what="incident")
    scenario = sc.load(folder).scenario
    return Mode(sid, kind, scenario.task, " ".join(rule.rule.split()), _branch_on(folder),
                incident.believed, incident.actual, incident.failure_class,
                harmful_rule=sid == "targeted-tests", source=folder, task_type=scenario.task_type or "")


def _bench(folder: Path) -> Mode:
    meta = yaml.safe_load((folder / "mode.yaml").read_text(encoding="utf-8"))
    rule = rules_mod.load(folder / "rule.yaml", named_by_id=False)
    scenario = sc.load(folder).scenario
    return Mode(folder.name, meta["mode"], scenario.task, " ".join(rule.rule.split()),
                _branch_on(folder), meta.get("believed", ""), meta.get("actual", ""),
                meta.get("failure_class", "wrong_assumption"), source=folder, task_type=scenario.task_type or "")


def hand_written() -> list[Mode]:
    """The bundled scenarios the stream uses, then the benchmark's own (bench/loopbench/scenarios/)."""
    return list(_hand_written())


@functools.lru_cache(maxsize=1)
def _hand_written() -> tuple[Mode, ...]:  # loaded once a process: a seed's stream no longer reads 13 folders
    modes = [_bundled(sid, kind) for sid, kind in BUNDLED_KINDS.items()]
    modes += [_bench(f) for f in sorted(BENCH_SCENARIOS.iterdir()) if (f / "mode.yaml").is_file()]
    return tuple(modes)


# -- the generated long tail ------------------------------------------------------------------------------

# Each one-off gets its own words (file, kept file, who reads it, sentence), drawn from (n) alone: with one
# template and only the two paths changing, any two one-off rules shared 60% of their content terms, which is
# distill's near-duplicate threshold (bot.gate.decision.TWIN_THRESHOLD), so the second was refused as a twin.
_EDITED = ("greet", "banner", "motd", "welcome", "footer", "title", "notice", "header", "tagline", "caption",
           "label", "slogan", "subtitle", "farewell", "heading", "blurb")
_EXT = ("txt", "md", "rst", "text")
_KEPT_DIR = ("keep", "deploy", "release", "infra", "ops", "ci", "vendor", "config", "hooks", "cron", "secrets",
             "mirror", "audit", "backup")
_KEPT_EXT = ("cfg", "ini", "toml", "conf", "env", "json")
_READER = ("the deploy job", "the release script", "the nightly backup", "the CDN purge", "the billing export",
           "the smoke tests", "the staging sync", "the audit cron", "the mirror push", "the metrics relay",
           "the docs build", "the canary rollout", "the cache warmer", "the invoice mailer")
_TEMPLATES = (
    "When a task names {edit}, change only that file and leave {kept} as it is: {reader} reads it.",
    "Before removing {kept} while editing {edit}, keep it: {reader} reads it, although nothing in the repository "
    "imports it.",
    "If {kept} looks stale during a change to {edit}, leave it untouched, because {reader} depends on it.",
    "Whenever {edit} is the file to update, do not tidy away {kept}; {reader} loads that config at run time.",
    "After setting text in {edit}, check that {kept} still exists before you finish, since {reader} needs it.",
)


def tail_words(n: int) -> dict[str, str]:
    """One-off ``n``'s own words: the file its task edits, the file it must keep, who reads that, its rule."""
    # Rotated, not drawn: one-offs of the same sentence (n apart by a multiple of 5) differ in who reads the
    # kept file until n differs by 70, and in the file names always.
    tag = f"{n:03d}"
    edit = f"{_EDITED[n % len(_EDITED)]}-{tag}.{_EXT[n // len(_EDITED) % len(_EXT)]}"
    kept = f"{_KEPT_DIR[n % len(_KEPT_DIR)]}/{tag}.{_KEPT_EXT[n // len(_KEPT_DIR) % len(_KEPT_EXT)]}"
    reader = _READER[n // len(_TEMPLATES) % len(_READER)]
    rule = _TEMPLATES[n % len(_TEMPLATES)].format(edit=edit, kept=kept, reader=reader)
    return {"tag": tag, "edit": edit, "kept": kept, "reader": reader, "rule": rule}


def tail_mode(n: int) -> Mode:
    """One-off mode ``n``: the agent "tidies away" a config file the task never mentioned."""
    w = tail_words(n)
    tag, edit, kept = w["tag"], w["edit"], w["kept"]
    return Mode(f"oneoff-{tag}", "oneoff", f"Set the text in {edit} to hello {tag}.", w["rule"], kept,
                f"{kept} was an unused leftover that could be removed",
                f"{kept} is read by {w['reader']}; removing it broke the release", "scope_creep", task_type="tail",
                files=(edit, kept))


def write_tail(folder: Path, mode: Mode) -> None:
    """A real scenario for a one-off mode: fixture, checks and a SIMULATED policy."""
    tag = mode.id.split("-")[1]
    edit, kept = mode.files
    repo = folder / "repo"
    (repo / kept).parent.mkdir(parents=True, exist_ok=True)
    (repo / edit).write_text("hi\n", encoding="utf-8")
    (repo / kept).write_text(f"deploy.channel={tag}\n", encoding="utf-8")
    scenario = {"id": mode.id, "task": mode.task, "repo": "repo", "task_type": "tail",
                "pass_if": [{"unchanged": [kept]},
                            {"succeeds": {"run": f"grep -qx 'hello {tag}' {edit}"}}],
                "budget": {"max_turns": 8, "timeout_s": 60, "max_cost_usd": 0.5}}
    (folder / "scenario.yaml").write_text("# Loop benchmark: a generated one-off failure mode.\n"
                                          + yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    write = {"write": {"path": edit, "content": f"hello {tag}\n"}}
    policy = {"branch_on": mode.branch_on,
              "without_rule": [write, {"bash": f"rm {kept}"},
                               {"say": "Set the text; removed a stale config."}],
              "with_rule": [{"write": dict(write["write"])}, {"say": f"Set the text; left {kept} as it is."}]}  # no YAML alias: banned
    (folder / "policy.yaml").write_text("# SIMULATED MODEL policy (generated, loop benchmark): not a real model.\n"
                                        + yaml.safe_dump(policy, sort_keys=False), encoding="utf-8")


def install(modes: list[Mode], scenarios: Path, suite: Path, only: tuple[str, ...] | None = None) -> None:
    """Every mode's folder under ``scenarios/``; the suite (``suite/``) links the hand-written ones.

    The suite is the seed's "replay suite": the curated scenarios, not every
    one-off. Copies (a scenario loader refuses a fixture behind a symlink); a
    rule's own scenario in the suite fails its baseline, so it is not judged there.
    """
    scenarios.mkdir(parents=True, exist_ok=True)
    suite.mkdir(parents=True, exist_ok=True)
    for mode in modes:
        target = scenarios / mode.id
        if target.exists():
            continue
        if mode.source is None:
            write_tail(target, mode)
        else:
            shutil.copytree(mode.source, target, ignore=shutil.ignore_patterns("__pycache__", "incidents", "logs"))
        if mode.kind != "oneoff" and (only is None or mode.id in only):
            shutil.copytree(target, suite / mode.id)


@functools.lru_cache(maxsize=None)
def guard(mode: Mode) -> str:
    """What escalating this mode's ignored rule gives, as ``bot.health.escalation`` plans it from its scenario:
    'hook' (a ``not_ran`` check: a PreToolUse deny hook), 'ci' (a ``diff_excludes`` check: a CI guard), or
    '' (neither: a rewording for a person, no mechanical guard)."""
    from bot.health import escalation

    with tempfile.TemporaryDirectory(prefix="loop-guard-") as tmp:
        folder = Path(tmp) / mode.id
        if mode.source is None:
            write_tail(folder, mode)
        else:
            shutil.copytree(mode.source, folder, ignore=shutil.ignore_patterns("__pycache__", "incidents", "logs"))
        scenario = sc.load(folder).scenario
    rule = Rule(id="rule-0001", rule=mode.rule, created=date(2027, 1, 4), replay=f"scenarios/{mode.id}")
    planned = escalation.escalation(rule, scenario)
    return "hook" if planned.deny else "ci" if planned.diff_excludes else ""

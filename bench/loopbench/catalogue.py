"""The failure modes the stream draws from: bundled scenarios, the benchmark's own, and a generated tail.

A mode is one scenario plus what the SIMULATED models need to play it: the
rule that fixes it (the good proposal), the belief delta the analyst states
when it fails, and its place in the stream (recurring, occasional, one-off,
done right).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from bot._util import bundled, records
from bot.incident.store import Incident
from bot.playbook import rule as rules_mod
from bot.replay.policy import load_policy
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


BUNDLED_KINDS = {"monorepo-test-cwd": "recurring", "lint-disable": "recurring", "dynamic-module-delete": "recurring",
                 "flaky-network-retry": "recurring", "targeted-tests": "occasional", VICTIM: "done-right"}


def _branch_on(folder: Path) -> str:
    return load_policy(folder / "policy.yaml").branch_on


def _bundled(sid: str, kind: str) -> Mode:
    folder = bundled.scenarios_dir() / sid
    rule = rules_mod.load(folder / "rule.yaml", named_by_id=False)
    first = sorted((folder / "incidents").glob("*.yaml"))[0]
    incident = records.load(Incident, first, what="incident")
    return Mode(sid, kind, sc.load(folder).scenario.task, " ".join(rule.rule.split()), _branch_on(folder),
                incident.believed, incident.actual, incident.failure_class,
                harmful_rule=sid == "targeted-tests", source=folder)


def _bench(folder: Path) -> Mode:
    meta = yaml.safe_load((folder / "mode.yaml").read_text(encoding="utf-8"))
    rule = rules_mod.load(folder / "rule.yaml", named_by_id=False)
    return Mode(folder.name, meta["mode"], sc.load(folder).scenario.task, " ".join(rule.rule.split()),
                _branch_on(folder), meta.get("believed", ""), meta.get("actual", ""),
                meta.get("failure_class", "wrong_assumption"), source=folder)


def hand_written() -> list[Mode]:
    """The bundled scenarios the stream uses, then the benchmark's own (bench/loopbench/scenarios/)."""
    modes = [_bundled(sid, kind) for sid, kind in BUNDLED_KINDS.items()]
    modes += [_bench(f) for f in sorted(BENCH_SCENARIOS.iterdir()) if (f / "mode.yaml").is_file()]
    return modes


# -- the generated long tail ------------------------------------------------------------------------------

def tail_mode(n: int) -> Mode:
    """One-off mode ``n``: the agent "tidies away" a config file the task never mentioned."""
    tag = f"{n:03d}"
    return Mode(f"oneoff-{tag}", "oneoff", f"Set the greeting in greet-{tag}.txt to hello {tag}.",
                f"When a task names greet-{tag}.txt, change only that file and leave keep/{tag}.cfg as it is.",
                f"keep/{tag}.cfg", f"keep/{tag}.cfg was an unused leftover that could be removed",
                f"keep/{tag}.cfg is read by the deploy job; removing it broke the release", "scope_creep")


def write_tail(folder: Path, mode: Mode) -> None:
    """A real scenario for a one-off mode: fixture, checks and a SIMULATED policy."""
    tag = mode.id.split("-")[1]
    repo = folder / "repo"
    (repo / "keep").mkdir(parents=True, exist_ok=True)
    (repo / f"greet-{tag}.txt").write_text("hi\n", encoding="utf-8")
    (repo / "keep" / f"{tag}.cfg").write_text(f"deploy.channel={tag}\n", encoding="utf-8")
    scenario = {"id": mode.id, "task": mode.task, "repo": "repo", "task_type": "tail",
                "pass_if": [{"unchanged": [f"keep/{tag}.cfg"]},
                            {"succeeds": {"run": f"grep -qx 'hello {tag}' greet-{tag}.txt"}}],
                "budget": {"max_turns": 8, "timeout_s": 60, "max_cost_usd": 0.5}}
    (folder / "scenario.yaml").write_text("# Loop benchmark: a generated one-off failure mode.\n"
                                          + yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    write = {"write": {"path": f"greet-{tag}.txt", "content": f"hello {tag}\n"}}
    policy = {"branch_on": mode.branch_on,
              "without_rule": [write, {"bash": f"rm keep/{tag}.cfg"},
                               {"say": "Set the greeting; removed a stale config."}],
              "with_rule": [write, {"say": f"Set the greeting; left keep/{tag}.cfg as it is."}]}
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

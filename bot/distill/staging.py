"""Staging a proposed scenario: the model's fixture files written only inside a fresh folder, bounded, never a path it names outside."""


from __future__ import annotations

import re
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from bot._util import yamlfile
from bot.distill.answers import NewScenario, validation_errors
from bot.distill.spec_change import Refused as _Refused
from bot.errors import BadInput
from bot.replay.gateway.policy import parse_policy
from bot.scenario import spec as scenario_mod

MAX_FILES = 40


MAX_FILE_BYTES = 64 * 1024


MAX_FIXTURE_BYTES = 256 * 1024


def stage_scenario(new: NewScenario, rule_text: str, staging: Path) -> Path:
    """Write the scenario into ``staging`` (outside the repo) and load it, or refuse."""
    data: dict[str, Any] = {"id": new.id, "task": new.task, "repo": "repo"}
    if new.task_type:
        data["task_type"] = new.task_type
    data["pass_if"] = new.pass_if
    if new.budget is not None:
        data["budget"] = new.budget
    if not new.solution:
        raise _Refused(f"scenario {new.id!r}: no `solution`; give the shell commands that do the task right (every "
                       "check must hold after them)")
    data["solution"] = list(new.solution)
    try:
        scenario = scenario_mod.Scenario.model_validate(data)
    except ValidationError as exc:
        raise _Refused(f"scenario {new.id!r}: {validation_errors(exc)}") from None
    files = _fixture_files(new.files)
    policy = None
    if new.policy is not None:
        policy = {k: new.policy.get(k) for k in ("branch_on", "with_rule", "without_rule")}
        try:
            parsed = parse_policy(policy, source=f"scenario {new.id!r} policy")
        except BadInput as exc:
            raise _Refused(exc.render()) from None
        for step in parsed.with_rule + parsed.without_rule:
            if step.action == "write" and _bad_path(step.path):
                raise _Refused(f"scenario {new.id!r} policy: write path {step.path!r} is refused; "
                               "give a path inside the fixture")
        if parsed.branch_on.casefold() not in rule_text.casefold():
            raise _Refused(f"scenario {new.id!r} policy: `branch_on` ({parsed.branch_on!r}) is not words of the rule, "
                           "so a simulated replay could never tell the rule is in the prompt")
    data["pass_if"] = [c.model_dump(mode="json", exclude_none=True) for c in scenario.pass_if]
    data["solution"] = list(scenario.solution.run)
    if new.budget is not None:
        data["budget"] = scenario.budget.model_dump(mode="json")
    folder = staging / uuid.uuid4().hex / scenario.id
    try:
        for rel, content in files.items():
            target = folder / "repo" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "scenario.yaml").write_text(yamlfile.dump(data, kind="scenario"), encoding="utf-8")
        if policy is not None:
            header = ("# SIMULATED MODEL policy (written by `replaybook distill`): scripted steps for offline "
                      "replays,\n# not a real model. Review its commands before running the gate.\n")
            body = yaml.safe_dump(policy, sort_keys=False, allow_unicode=True, width=88)
            (folder / "policy.yaml").write_text(header + body, encoding="utf-8")
    except OSError as exc:  # e.g. a file and a folder of one name, or a name too long
        raise _Refused(f"scenario {new.id!r}: its files cannot be laid out: {exc.strerror or exc}") from None
    try:
        scenario_mod.load(folder)
    except BadInput as exc:
        raise _Refused(f"scenario {new.id!r} does not load: {exc.render()}") from None
    return folder


def _fixture_files(files: dict[str, str]) -> dict[PurePosixPath, bytes]:
    """The fixture's files, every path checked to stay inside ``repo/``."""
    if not files:
        raise _Refused("new scenario: `files` is empty; a fixture repository needs the files the task works on")
    if len(files) > MAX_FILES:
        raise _Refused(f"new scenario: {len(files)} files; a fixture holds at most {MAX_FILES}")
    out: dict[PurePosixPath, bytes] = {}
    total = 0
    for raw, content in files.items():
        if _bad_path(raw):
            raise _Refused(f"new scenario: file path {raw!r} is refused; give a relative path inside the fixture "
                           "(no absolute paths, `..`, `~`, backslashes or .git)")
        data = content.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise _Refused(f"new scenario: file {raw!r} is {len(data):,} bytes; the limit is {MAX_FILE_BYTES:,}")
        total += len(data)
        out[PurePosixPath(raw)] = data
    if total > MAX_FIXTURE_BYTES:
        raise _Refused(f"new scenario: the fixture is {total:,} bytes; the limit is {MAX_FIXTURE_BYTES:,}")
    return out


def _bad_path(raw: str) -> bool:
    """Absolute, escaping (``..``), home-relative, Windows-style or into ``.git``: not a fixture path."""
    return (not raw or "\\" in raw or "\0" in raw or PurePosixPath(raw).is_absolute()
            or bool(re.match(r"^[A-Za-z]:", raw)) or raw.startswith("~")
            or any(part in ("..", ".git", "") for part in raw.split("/")))


def unsound(folder: Path) -> str | None:
    """Why a staged scenario cannot prove a rule (``bot.replay.validate``: the do-nothing control must fail and
    the reference solution pass every check, both replayed in the sandbox), or None when it is sound."""
    from bot.replay import validate as sv

    finding = sv.validate(folder, control=True, policy=False)
    lines = [line.replace(str(folder.parent), "").lstrip("/") for line in finding.lines()]
    return "; ".join(lines) if lines else None

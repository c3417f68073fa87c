"""Rules: at most two sentences, when it applies and what to do, proven by replay."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import ClassVar

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from bot._util import records
from bot.errors import BadInput
from bot.playbook import rule_chars, rule_text

RULE_ID = r"^rule-\d{4,}$"
CITATION = re.compile(r"\[(rule-\d{4,})\]")
MAX_SENTENCES = 2
MAX_RULE_CHARS = 400
MAX_GLOBS = 20
# A glob is rendered into YAML front matter and comma-separated host fields:
# no quotes, commas, spaces, colons, '#' or newlines can reach it.
GLOB = re.compile(r"^[A-Za-z0-9_.*?\[\]{}!/+@=-]{1,200}$")

# Words that open a condition: "Before running tests, …", "When a module looks
# unused, …". A rule without one is advice with no trigger, which agents ignore.
CONDITION_WORDS = (
    "when", "whenever", "before", "after", "if", "unless", "while", "during",
    "once", "until", "where", "wherever", "for any", "for every", "on any", "in any",
)
_CONDITION = re.compile(r"\b(" + "|".join(re.escape(w) for w in CONDITION_WORDS) + r")\b", re.IGNORECASE)
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "incl.", "no.")


def sentences(text: str) -> list[str]:
    """Split prose into sentences; dots inside names (pytest.ini, v2.1) don't split."""
    masked = text
    for abbr in _ABBREVIATIONS:
        masked = re.sub(re.escape(abbr), abbr.replace(".", "\0"), masked, flags=re.IGNORECASE)
    parts = re.split(r"(?<=[.!?])\s+(?=\S)", masked.strip())
    return [p.replace("\0", ".") for p in parts if p.strip()]


def has_condition(text: str) -> bool:
    return bool(_CONDITION.search(text))


class Rule(records.Record):
    """One playbook rule (see docs/formats.md). Its folder is its state."""

    kind: ClassVar[str] = "rule"
    # An unknown key is refused, not kept: `task_type:` (the incident's spelling) would silently apply the
    # rule to every task. The message names the nearest field ("did you mean `task_types`?").
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=RULE_ID, description="rule-NNNN; unique, never reused.")
    rule: str = Field(min_length=1, description="At most two sentences: when it applies, and what to do.")
    cites: list[str] = Field(default_factory=list, description="Incident ids; fewer than two makes it provisional.")
    provisional: bool | None = Field(default=None, description="True when fewer than two incidents are cited. Derived if omitted.")
    task_types: list[str] = Field(default_factory=list, description="Task types it applies to; empty: every task.")
    replay: str | None = Field(default=None, min_length=1, description="Path of the scenario folder that proves it, e.g. "
                               "scenarios/monorepo-test-cwd. Every rule has one, but an org rule, which has `replays`.")
    replays: dict[str, str] = Field(
        default_factory=dict,
        description="Org tier only: each member repository's name -> the scenario folder in that member that proves "
        "it (e.g. {api: scenarios/monorepo-test-cwd}); `replaybook org gate` replays every one.",
    )
    created: date
    last_hit: date | None = Field(default=None, description="Last time a run cited [rule-NNNN].")
    paths: list[str] = Field(
        default_factory=list, max_length=MAX_GLOBS,
        description="Globs of the files it applies to (e.g. `src/**/*.py`); empty: every file. Hosts with path "
        "scoping (Claude rules, Copilot applyTo, Cursor and Windsurf globs) get it scoped.",
    )
    scope_reason: str | None = Field(
        default=None, max_length=300,
        description="Why the rule has the scope it has (set by distill): the files its incidents' evidence names, "
        "or why it must be global. Never shown to agents.",
    )
    agents: list[str] = Field(
        default_factory=list,
        description="Agents the gate proved it on (`claude-code`, `codex`, ...); empty: not recorded, rendered for "
        "every host. Set, it is rendered only into those agents' files.",
    )
    hits: int | None = Field(default=None, ge=0, description="Days on which a run cited [rule-NNNN] (counted as last_hit moves); unset: 0.")
    retired: date | None = Field(default=None, description="Archive only: the day it was retired.")
    retired_reason: str | None = Field(default=None, description="Archive only: why it was retired (cap, manual, "
                                       "refused, redundant: …).")
    refused_reason: str | None = Field(default=None, description="Archive only: why the gate refused the proposal "
                                       "that a re-proposal replaced.")
    replaced_by: str | None = Field(default=None, description="Archive only: the re-proposal that replaced it.")

    @field_validator("rule")
    @classmethod
    def _two_sentences(cls, value: str) -> str:
        if (long := rule_text.too_long(value)) is not None:  # size first: nothing else reads a huge value
            raise ValueError(long)
        written, value = value, rule_chars.normalise(value)  # NFKC, one line: the form stored and rendered
        count = len(sentences(value))
        if count > MAX_SENTENCES:
            raise ValueError(
                f"has {count} sentences; a rule is at most two (when it applies, what to do)"
            )
        if len(value) > MAX_RULE_CHARS:
            raise ValueError(f"is {len(value)} characters; keep a rule under {MAX_RULE_CHARS}")
        if "<!--" in value or "-->" in value:
            raise ValueError("contains an HTML comment marker (<!-- or -->); remove it")
        if not has_condition(value):
            raise ValueError(
                "states no condition; say when it applies first, e.g. 'Before running tests, …' "
                "or 'When a module looks unused, …'"
            )
        refused = rule_text.problems(written)  # what agents would obey beyond what a replay proves
        if refused:
            raise ValueError("; ".join(refused))
        return value

    @field_validator("cites")
    @classmethod
    def _unique_cites(cls, value: list[str]) -> list[str]:
        dupes = sorted({c for c in value if value.count(c) > 1})
        if dupes:
            raise ValueError(f"cites {', '.join(dupes)} more than once; cite each incident once")
        return value

    @field_validator("scope_reason")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        return None if value is None else " ".join(value.split())[:300]

    @field_validator("task_types", "agents")
    @classmethod
    def _slugs(cls, value: list[str], info: ValidationInfo) -> list[str]:
        bad = [t for t in value if not re.match(records.SLUG, t)]
        if bad:
            noun = "task-type slugs" if info.field_name == "task_types" else "agent names"
            raise ValueError(f"{bad!r} are not {noun} (lowercase letters, digits, -, _, .)")
        return list(dict.fromkeys(value))

    @field_validator("paths")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        for glob in value:
            if not GLOB.match(glob):
                raise ValueError(
                    f"{glob[:80]!r} is not a plain glob; use letters, digits and _ . * ? [ ] {{ }} ! / + @ = - "
                    "(no spaces, quotes, commas or colons; write two globs instead of a comma)"
                )
            if glob.startswith("/") or ".." in glob.split("/"):
                raise ValueError(f"{glob!r} must be relative to the repository root, without `..`")
        return list(dict.fromkeys(value))

    def to_yaml_data(self) -> dict:
        data = super().to_yaml_data()
        if not data.get("replays"):
            data.pop("replays", None)  # only org rules have them
        return data

    @field_validator("replays")
    @classmethod
    def _member_scenarios(cls, value: dict[str, str]) -> dict[str, str]:
        for member, folder in value.items():
            if not re.match(records.SLUG, member):
                raise ValueError(f"member {member[:80]!r} is not a name (lowercase letters, digits, -, _, .)")
            if not GLOB.match(folder) or folder.startswith("/") or ".." in folder.split("/"):
                raise ValueError(f"{member}: {folder[:80]!r} must be a scenario folder relative to the member's root, "
                                 "without `..`")
        return value

    @model_validator(mode="after")
    def _has_a_scenario(self) -> "Rule":
        if not self.replay and not self.replays:
            raise ValueError("`replay`: give the scenario folder that proves the rule, e.g. scenarios/monorepo-test-cwd")
        return self

    @model_validator(mode="after")
    def _provisional_matches_cites(self) -> "Rule":
        derived = len(self.cites) < 2
        if self.provisional is None:
            self.provisional = derived
        elif self.provisional != derived:
            n = len(self.cites)
            want = "true" if derived else "false"
            raise ValueError(
                f"`provisional` is {str(self.provisional).lower()} but the rule cites {n} incident(s); "
                f"set `provisional: {want}` (a rule citing fewer than two is provisional)"
            )
        return self

    def applies_to(self, task_type: str | None) -> bool:
        return not self.task_types or (task_type is not None and task_type in self.task_types)

    def heat(self) -> tuple:
        """Sort key, coldest first: provisional, then oldest last hit, then oldest created.

        A rule never cited counts from the day it was created, so a rule just
        admitted is not the coldest by default. Provisional rules stand on one
        incident, so they retire before proven ones.
        """
        return (not self.provisional, self.last_hit or self.created, self.created, self.id)


def load(path: Path, *, named_by_id: bool = True) -> Rule:
    """Load a rule file; in the playbook its file name must be its id."""
    rule = records.load(Rule, path, what="rule")
    if named_by_id and rule.id != Path(path).stem:
        raise BadInput(
            f"{path}: field `id` is {rule.id!r} but the file is named {Path(path).name!r}; "
            f"rename the file to {rule.id}.yaml"
        )
    return rule


def citations(text: str) -> list[str]:
    """Rule ids cited as ``[rule-NNNN]`` in ``text``, in order, without repeats."""
    return list(dict.fromkeys(CITATION.findall(text)))

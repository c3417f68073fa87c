"""``.replaybook.yml``: the cap, model names, paths and labels.

Every key has a default, so nothing needs configuring to start. The file is
found in the working folder or the nearest parent; its folder is the root
that every path is relative to.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot._util import records, yamlfile
from bot.errors import BadInput

if TYPE_CHECKING:
    from bot.change import Tree
    from bot.model.llm import LLM
    from bot.model.served import Endpoint
    from bot.playbook.org import OrgTier as Tier
    from bot.playbook.store import Playbook
    from bot.replay.engine import ReplayOptions
    from bot.settings import Environment

FILENAME = ".replaybook.yml"
ORG_CAP = 15  # an org tier is read by every member: it stays short


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Models(_Section):
    agent: str = Field(default="claude-sonnet-5-5", description="Model the replayed agent runs on.")
    distill: str = Field(default="claude-sonnet-5-5", description="Model that writes rules from incidents.")
    capture: str = Field(default="claude-haiku-5-5", description="Model that fills in incidents.")
    reflect: str = Field(default="claude-haiku-5-5", description="Model that reflects on a trace (hindsight).")
    screen: str | None = Field(default=None, description="Cheaper model for the gate's first screen.")


class Paths(_Section):
    incidents: str = "incidents"
    playbook: str = "playbook"
    scenarios: str = "scenarios"
    cache: str = ".replaybook/cache"
    traces: str = ".replaybook/traces"

    @field_validator("*")
    @classmethod
    def _inside(cls, value: str) -> str:
        """Every path stays inside the repository: a checkout under test (a PR's ``.replaybook.yml``) cannot make
        the gate write, prune or read run folders, caches or rules anywhere else on the runner."""
        parts = Path(value).parts
        if not value.strip() or Path(value).is_absolute() or ".." in parts:
            raise ValueError("must be a folder inside the repository, relative to its root, with no `..` "
                             f"(got {value[:80]!r}); give a relative path such as `.replaybook/traces`")
        return value


class Labels(_Section):
    incident: str = "incident"
    invalid: str = "incident:invalid"
    rule: str = "replaybook:rule"


class GitHub(_Section):
    """How the bot reads a repository on GitHub (``replaybook github handle``); flags and env override these."""

    agent_logins: list[str] = Field(
        default_factory=list,
        description="Accounts the coding agent opens PRs and commits as (e.g. `copilot-swe-agent[bot]`): their "
        "rejected PRs become incidents and their `[rule-NNNN]` citations count as rule hits.",
    )
    agent_label: str | None = Field(default=None, description="A PR with this label counts as the agent's.")
    bot_workflow_prefixes: list[str] = Field(
        default_factory=lambda: ["replaybook"],
        description="Workflows whose name or file name starts with one of these (any case) are the bot's own: "
        "never captured.",
    )
    bot_logins: list[str] = Field(
        default_factory=lambda: ["github-actions[bot]"], min_length=1,
        description="The accounts the bot writes as: the workflow token's `github-actions[bot]` and, with a GitHub "
        "App, its `NAME[bot]`. Only their issues, comments and PRs are read as the bot's own (markers, yaml "
        "blocks, rule PRs).",
    )
    watched_workflows: list[str] = Field(
        default_factory=list,
        description="Capture failures of these workflows only (name or file name, e.g. `CI` or `ci.yml`); empty: all.",
    )
    max_open_rule_prs: int = Field(default=5, ge=0, le=100, description="Most rule PRs distill keeps open at once.")
    distill_threshold: int = Field(
        default=10, ge=0, le=10_000,
        description="Start distill when this many incident issues are open and not cited by an open rule PR "
        "(besides the weekly schedule); 0 turns it off.",
    )
    distill_workflow: str = Field(
        default="replaybook-distill.yml",
        description="The workflow file the threshold dispatches (it needs a `workflow_dispatch` trigger).",
    )
    dashboard: bool = Field(
        default=False,
        description="The scheduled run keeps the dashboard issue (labelled `replaybook:dashboard`) up to date and "
        "acts on its ticked boxes; see docs/github.md.",
    )
    hits_lookback_days: int = Field(
        default=35, ge=1, le=400,
        description="How far back the scheduled run looks for `[rule-NNNN]` in the agent's merged PRs and commits.",
    )


class Replay(_Section):
    """How replays run (``replay``, ``gate``, ``demo``); ``--sandbox`` overrides ``sandbox``."""

    sandbox: Literal["bwrap", "docker", "none"] = Field(
        default="bwrap", description="Isolation of the agent: bwrap (Linux), docker, or none (unisolated; "
        "the GitHub gate refuses it).",
    )
    deliver: Literal["prompt", "files"] = Field(
        default="prompt", description="How the playbook reaches the agent: prompt (its own prompt channel: system "
        "prompt, --append-system-prompt, developer_instructions) or files (where its host reads a repository's "
        "instructions: AGENTS.md, CLAUDE.md, a `paths:` rule in .claude/rules/), so host limits apply.",
    )
    keep_runs: int = Field(default=200, ge=1, le=100_000, description="Run folders kept under paths.traces.")
    keep_runs_days: int = Field(default=30, ge=1, le=3650, description="Run folders older than this are removed.")
    agents: list[str] = Field(
        default_factory=list,
        description="Agents `gate` proves each rule on when no --agent is given (e.g. [claude-code, codex]); "
        "empty: builtin. A rule proven on only some is rendered only into their files.",
    )

    @field_validator("agents")
    @classmethod
    def _known_agents(cls, value: list[str]) -> list[str]:
        from bot.replay.agents import AGENTS

        bad = [a for a in value if a not in AGENTS or a == "command"]
        if bad:
            raise ValueError(f"{bad!r}: not agents the gate can run; use {', '.join(a for a in AGENTS if a != 'command')}")
        return list(dict.fromkeys(value))


class Health(_Section):
    """How `replaybook report` and retirement judge a rule (see docs/playbook.md)."""

    ignored_after: int = Field(default=2, ge=1, le=1000,
                               description="A rule with this many repeats after its admission is flagged `ignored`.")
    half_life_days: int = Field(default=30, ge=1, le=3650,
                                description="A rule's score halves for every this many days since it was last cited.")
    retest_max_cost_usd: float | None = Field(default=1.0, ge=0, description="Budget of one redundancy re-test on "
                                              "GitHub (monthly, or when the agent changes); past it rules are `unknown`.")


class GateBudget(_Section):
    """What one gate may spend on one candidate before it answers inconclusive (docs/gate.md, "The budget")."""

    replays: int | None = Field(default=None, ge=1, le=100_000, description="Fresh replays per candidate (cache hits "
                                "are free; the do-nothing control and trials run ahead count).")
    usd: float | None = Field(default=None, gt=0, le=100_000, description="Dollars per candidate: a replay starts "
                              "only if its scenario's `budget.max_cost_usd` still fits.")

    @model_validator(mode="after")
    def _something(self) -> "GateBudget":
        if self.replays is None and self.usd is None:
            raise ValueError("give `replays` (e.g. `budget: {replays: 40}`) or `usd` (e.g. `budget: {usd: 3}`), or "
                             "remove `budget` for no limit")
        return self


class Gate(_Section):
    """What the admit gate does beyond replaying rules (see docs/gate.md, "What a PR can change")."""

    budget: GateBudget | None = Field(
        default=None,
        description="The most one gate spends on one candidate: `{replays: N}` and/or `{usd: D}`. When it ends "
        "before the tests decide, the gate answers inconclusive (exit 1 locally, a `neutral` check on GitHub), the "
        "rule stays proposed and its trials stay cached, so the same gate goes on from there. Default: no limit. "
        "Read from the base branch's config.",
    )

    unreached: Literal["judge", "once"] = Field(
        default="judge",
        description="Suite scenarios the rule's scope (`task_types`, `paths`) cannot reach: `judge` gives them the "
        "full regression test like every other; `once` screens them: replayed with the rule (agents may read the "
        "whole file), a first pass clears one, a failure goes on to the full test. docs/gate.md, \"Reach\". Read "
        "from the base branch's config.",
    )

    def options(self) -> dict:
        """``bot.gate.result.GateOptions``' budget and reach fields (none at their defaults)."""
        out = {} if self.budget is None else {"budget_replays": self.budget.replays, "budget_usd": self.budget.usd}
        return out | ({"unreached_once": True} if self.unreached == "once" else {})

    own_test: Literal["auto", "sequential", "paired", "baseline"] = Field(
        default="auto",
        description="How the gate judges the rule on its own scenario: `sequential` (at most 0 of 3 trials pass "
        "without the rule, at least 4 of 5 with it: sound only for an agent that makes its mistake every time), "
        "`paired` (before and after in pairs, a sequential test on the discordant pairs: for an agent whose runs "
        "differ, as a real model's do; about 3 to 6 times the runs, and `--trials` does not apply), or `auto` "
        "(sequential for the simulated model on a scenario with no chance in its policy, paired for everything "
        "else, a real model always), or `baseline` (the rule's trials against the scenario's cached 40-trial "
        "baseline, shared with every gate's suite check of it: a sequential test of a cut in the mistake rate, "
        "about a third of the paired test's trials once the baseline is cached). docs/gate.md, \"For a noisy "
        "agent\". Read from the base branch's config.",
    )

    unproven_instructions: Literal["report", "fail"] = Field(
        default="report",
        description="Hand-written instructions a PR adds or changes (text outside the playbook markers of CLAUDE.md, "
        "AGENTS.md and the like, a new file in .claude/rules/, .cursor/rules/, .github/instructions/ or "
        ".windsurf/rules/): `report` names them in the gate report and passes; `fail` fails the gate until a "
        "maintainer merges them another way. Read from the base branch's config.",
    )


class OrgSource(_Section):
    """Where an org tier or a member is: a folder (`path`) or a repository pinned to a commit (`repo`, `ref`)."""

    path: str | None = Field(default=None, min_length=1, description="A folder, relative to this file's folder.")
    repo: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$",
                             description="OWNER/NAME on GitHub; checked out (by the workflow, or by hand) at `ref` into "
                             ".replaybook/org/OWNER/NAME.")
    ref: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$", description="The commit `repo` is pinned to.")

    @model_validator(mode="after")
    def _one_place(self) -> "OrgSource":
        if (self.path is None) == (self.repo is None):
            raise ValueError("give `path` (a folder) or `repo` with `ref` (OWNER/NAME pinned to a 40-hex commit)")
        if self.repo is not None and self.repo.split("/")[1] in (".", ".."):
            raise ValueError(f"`repo: {self.repo}` is no repository name: give OWNER/NAME")
        if self.repo is not None and self.ref is None:
            raise ValueError(f"`repo: {self.repo}` needs `ref`: the 40-hex commit it is pinned to")
        return self

    def folder(self, root: Path) -> Path:
        return root / self.path if self.path is not None else root / ".replaybook" / "org" / str(self.repo)

    @property
    def label(self) -> str:
        return f"{self.repo}@{self.ref[:7]}" if self.repo and self.ref else str(self.path)


class Org(OrgSource):
    """A member's organisation tier (docs/org.md): rendered before this repository's rules."""

    decline: dict[str, str] = Field(default_factory=dict, description="Org rule id -> why this repository declines "
                                    "it; a declined rule is not rendered here, and the report shows the reason.")
    budget_bytes: int | None = Field(default=None, ge=256, le=1_000_000, description="Most bytes of org rules "
                                     "rendered here; default a quarter of the smallest limit among `render` targets.")

    @field_validator("decline")
    @classmethod
    def _reasons(cls, value: dict[str, str]) -> dict[str, str]:
        from bot.playbook.rule import RULE_ID

        for rule_id, reason in value.items():
            if not re.match(RULE_ID, rule_id):
                raise ValueError(f"{rule_id[:80]!r} is not an org rule id (rule-NNNN)")
            if not isinstance(reason, str) or not reason.strip():
                raise ValueError(f"{rule_id}: give the reason this repository declines it")
        return {k: " ".join(v.split())[:300] for k, v in value.items()}


class OrgRepository(_Section):
    """In the org repository: its members and how strict its gate is (`replaybook org gate`, docs/org.md)."""

    members: dict[str, OrgSource] = Field(default_factory=dict, description="Member name -> where it is.")
    min_members: int = Field(default=3, ge=2, le=100, description="Members an org rule's scenarios must come from.")
    agents: list[str] = Field(default_factory=list, description="Agents an org rule is proven on; empty: builtin.")

    @field_validator("members")
    @classmethod
    def _names(cls, value: dict[str, OrgSource]) -> dict[str, OrgSource]:
        bad = [name for name in value if not re.match(records.SLUG, name)]
        if bad:
            raise ValueError(f"{bad!r} are not member names (lowercase letters, digits, -, _, .)")
        return value


class Config(_Section):
    cap: int = Field(default=60, ge=1, le=1000, description="Most admitted rules; past it the coldest retires "
                     "(default 60; 15 in an org repository, one with `org_tier`).")
    sections: list[str] = Field(
        default_factory=list,
        description="Files (e.g. CLAUDE.md, AGENTS.md) whose marked playbook section `check` keeps in sync.",
    )
    render: list[str] = Field(
        default_factory=list,
        description="Hosts whose instruction files `playbook render` and the maintenance PR keep in sync: claude "
        "(CLAUDE.md), agents (AGENTS.md), copilot, cursor, gemini, windsurf. `NAME:PATH` moves the main file, "
        "e.g. `claude:.claude/rules/replaybook.md`.",
    )
    models: Models = Field(default_factory=Models)
    paths: Paths = Field(default_factory=Paths)
    labels: Labels = Field(default_factory=Labels)
    github: GitHub = Field(default_factory=GitHub)
    replay: Replay = Field(default_factory=Replay)
    health: Health = Field(default_factory=Health)
    gate: Gate = Field(default_factory=Gate)
    org: Org | None = Field(default=None, description="The organisation's tier this repository takes (docs/org.md).")
    org_tier: OrgRepository | None = Field(default=None, description="Set in the org repository itself: its members.")

    @model_validator(mode="after")
    def _org_cap(self) -> "Config":
        if self.org_tier is not None and "cap" not in self.model_fields_set:
            self.cap = ORG_CAP
        return self


    @field_validator("render")
    @classmethod
    def _targets(cls, value: list[str]) -> list[str]:
        from bot.playbook.render.hosts import parse_all

        try:
            parse_all(value)
        except BadInput as exc:
            raise ValueError(exc.message) from None
        return value


class Settings:
    """A loaded config bound to its root folder."""

    def __init__(self, root: Path, config: Config, source: Path | None):
        self.root = root
        self.config = config
        self.source = source

    def path(self, name: str) -> Path:
        return self.root / getattr(self.config.paths, name)

    @property
    def cap(self) -> int:
        return self.config.cap


def find(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        candidate = folder / FILENAME
        if candidate.is_file():
            return candidate
    return None


def load(root: Path | None = None) -> Settings:
    """Settings for ``root`` (its config file, or defaults), else the nearest config up from cwd."""
    if root is not None:
        root = Path(root).resolve()
        if not root.is_dir():
            raise BadInput(f"{root}: --root is not a folder")
        source = root / FILENAME if (root / FILENAME).is_file() else None
    else:
        source = find(Path.cwd().resolve())
        root = source.parent if source else Path.cwd().resolve()
    if source is None:
        return Settings(root, Config(), None)
    doc = yamlfile.load(source, what="config file")
    config = records.from_document(Config, doc, what="config")
    return Settings(root, config, source)


# ------------------------------------------------ what is built from the config and the environment


def llm(env: "Environment", model: str, **options: Any) -> "LLM":
    """The model adapter for ``model`` (imports the anthropic SDK): ``local`` is the local model server
    (started on first use, no key), any other id is reached with the environment's key and base URL."""
    from bot.model import served
    from bot.model.llm import LLM

    if served.is_local(model):
        local = local_model()
        return LLM.connect(served.LOCAL, api_key=local.api_key, base_url=local.base_url, label=local.label,
                           structured=True, **options)
    if not env.api_key:
        raise BadInput(f"model {model!r} is a hosted model: set ANTHROPIC_API_KEY, or choose `local` for the model "
                       f"`{served.INSTALL_HINT}` installs")
    return LLM.connect(model, api_key=env.api_key, base_url=env.base_url, **options)


def local_model() -> "Endpoint":
    """The local model server of this process (``bot.model.served.local``), its engine in the replay's jail."""
    from bot.model import served
    from bot.replay.sandbox.interrupt import on_interrupt
    from bot.replay.sandbox.isolation import engine_jail

    on_interrupt(served.abort)  # Ctrl-C ends a trial waiting on the model's answer, not after it
    return served.local(engine_jail)


def has_model(env: "Environment", model: str) -> bool:
    """True when ``model`` can answer without asking the user for anything: ``local``, or a hosted id with a key."""
    from bot.model import served

    return served.is_local(model) or bool(env.api_key)


def for_agent(env: "Environment", agent: str) -> tuple[str, str | None, str]:
    """(the key's variable name, the key, the upstream URL) for the API shape ``agent`` speaks."""
    from bot.replay.agents import upstream_env

    key_var, default = upstream_env(agent)
    key, upstream = env.key_and_upstream(key_var, default)
    return key_var, key, upstream


def require_key(env: "Environment", agent: str, *models: str | None) -> None:
    """BadInput (exit 2) when one of ``models`` is a hosted model and the key ``agent``'s API needs is not set."""
    from bot.model import served

    key_var, key, _ = for_agent(env, agent)
    hosted = [m for m in models if served.needs_key(m)]
    if hosted and not key:
        raise BadInput(f"--model {hosted[0]} is a hosted model and needs {key_var}; use `local` for the local model "
                       f"(`{served.INSTALL_HINT}`) or `scripted` for the simulated one")


def replay_options(settings: Settings, env: "Environment", *, model: str, runs_dir: Path | None = None,
                   sandbox: str | None = None, **given: Any) -> "ReplayOptions":
    """How to replay, from the command line (``given``, ``runs_dir``, ``sandbox``), the config and ``env``.

    The key goes to a hosted model only unless ``api_key`` is given (the gate's screen model may be
    real when the agent's is not); runs are kept under ``paths.traces`` and the sandbox is
    ``replay.sandbox`` unless given. ``local`` starts the local model server and makes it the
    gateway's upstream (no key leaves the gateway; none is needed).
    """
    from bot.model import served
    from bot.replay.engine import ReplayOptions

    cfg = settings.config.replay
    _, key, upstream = for_agent(env, given.get("agent") or "builtin")
    if served.is_local(model):
        local = local_model()
        given["api_key"], upstream = local.api_key, local.base_url
        given.setdefault("model_label", local.label)
    given.setdefault("api_key", key if served.needs_key(model) else None)
    given.setdefault("deliver", cfg.deliver)
    return ReplayOptions(model=model, upstream_url=upstream, runs_dir=runs_dir or settings.path("traces"),
                         sandbox=sandbox or cfg.sandbox, keep_runs=cfg.keep_runs, keep_runs_days=cfg.keep_runs_days,
                         **given)


def org_tier(settings: Settings, tree: "Tree | None" = None) -> "Tier | None":
    """The org tier this repository takes (``org:``), read from where it is checked out; None without one.

    With ``tree`` (a commit's files, as the GitHub gate reads the base), an ``org: {path: …}`` inside the
    repository is read from that tree too, never from a checkout the PR shaped; a pinned ``repo`` is read
    from its own checkout under ``.replaybook/org/``, which no commit of this repository holds.
    """
    from bot.playbook import org as org_mod

    link = settings.config.org
    if link is None:
        return None
    folder = link.folder(settings.root)
    budget = link.budget_bytes or org_mod.budget_for(settings.config.render)
    rel = _inside(folder, settings.root) if tree is not None and link.path is not None else None
    if rel is not None:
        from bot.playbook.store import Playbook

        rules = Playbook("playbook" if rel == "." else f"{rel}/playbook", root=settings.root, tree=tree).admitted()
    else:
        rules = org_mod.load_rules(folder, link.label)
    return org_mod.OrgTier(link.label, rules, dict(link.decline), budget)


def _inside(folder: Path, root: Path) -> str | None:
    """``folder`` relative to ``root`` (posix), or None when it lies outside."""
    import os

    rel = os.path.relpath(os.path.normpath(folder), os.path.normpath(root))
    return None if rel == ".." or rel.startswith("../") else Path(rel).as_posix()


def playbook(settings: Settings, *, folder: "Path | str | None" = None, root: Path | None = None,
             tree: "Tree | None" = None, incidents: Any = None, cap: int | None = None) -> "Playbook":
    """The repository's playbook under ``settings``, with the org tier it takes attached.

    Every reader of the text agents read (rendering, the gate's prompts, the instruction check, the
    maintenance, hits and rule PRs) builds it here, so none leaves the tier out (docs/org.md). ``folder``
    defaults to ``paths.playbook``; with ``tree`` it is the playbook's path relative to ``root``.
    """
    from bot.playbook.store import Playbook

    root = settings.root if root is None else Path(root)
    folder = settings.path("playbook") if folder is None else folder
    return Playbook(folder, root=root, cap=settings.cap if cap is None else cap, incidents=incidents, tree=tree,
                    half_life_days=settings.config.health.half_life_days, org=org_tier(settings, tree))

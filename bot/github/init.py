"""``replaybook init``: set a repository up for Replaybook, and keep that set-up current.

It writes two kinds of file:

- **Managed** files (the workflows and the incident issue form) start with a header naming the Replaybook version that wrote them
  and a hash of the rest of the file. While the file still matches its hash,
  a later ``init`` (e.g. after upgrading Replaybook) updates it silently; once
  someone has edited it, ``init`` refuses to overwrite it unless forced.
- **Seed** files (``.replaybook.yml``, the rendered playbook, the rule
  folders, the scenarios README) are written once, when missing, and are the user's from then on.

``plan(root)`` decides everything without writing; ``apply(plan, force)``
writes, all or nothing: when one file is refused, nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jinja2

from bot import config as config_mod
from bot import settings
from bot._util import yamlfile
from bot._util.build_info import VERSION as __version__
from bot._util.markdown import table
from bot.change import Change, apply_local, locked
from bot.errors import BadInput
from bot.gate.stats import SequentialTest

#: Where the composite actions live: ``<ACTIONS_REPO>/actions/<name>@<commit>``.
ACTIONS_REPO = "replaybook/replaybook"
APP_ENVIRONMENT = "replaybook-gate"  # the GitHub environment holding the App's key, limited to the default branch

#: The commit each release tag ``v<version>`` of ACTIONS_REPO points at. Workflows pin the actions to it,
#: never to the tag (a tag can be moved). Optional: every build records its own commit (hatch_build.py,
#: bot/_util/build_info.py), which ``init`` uses when no line is here.
RELEASE_COMMITS: dict[str, str] = {}
ACTIONS_SHA_ENV = "REPLAYBOOK_ACTIONS_SHA"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
ACTIONS = ("capture", "distill", "admit", "replay")
WORKFLOWS = {name: f".github/workflows/replaybook-{name}.yml" for name in ACTIONS}
ISSUE_FORM = ".github/ISSUE_TEMPLATE/incident.yml"
#: the org repository's gate (docs/org.md): written only where `org_tier` lists members pinned on GitHub
ORG_WORKFLOW = ".github/workflows/replaybook-org-admit.yml"
#: the org repository's promotion: a weekly PR of the rules its members admitted (docs/org.md)
ORG_PROMOTE_WORKFLOW = ".github/workflows/replaybook-org-promote.yml"
BOT_PREFIX = "replaybook"  # config github.bot_workflow_prefixes: never captured

State = Literal["missing", "current", "stale", "modified", "conflict", "present"]

_HEADER = re.compile(r"Written by `replaybook init` (\S+) \(sha256:([0-9a-f]{16})\)")
_COMMENT = {"yaml": "# {}"}
_WHAT = {
    "missing": "written",
    "current": "nothing to do",
    "stale": "updated (unchanged since init wrote it)",
    "modified": "kept: changed by hand, and init has nothing newer",
    "conflict": "refused: changed by hand; --force overwrites it",
    "present": "kept: yours once written",
}
NEEDS_WORK = ("missing", "stale", "conflict")

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("bot.github", "templates/init"),
    # Workflows are full of ${{ }}: jinja's own delimiters would collide with them.
    variable_start_string="[[", variable_end_string="]]",
    block_start_string="[%", block_end_string="%]",
    comment_start_string="[#", comment_end_string="#]",
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
    autoescape=False,
)


def version() -> str:
    """The installed Replaybook's version (importlib.metadata): what the workflows pin the actions to."""
    return __version__


DOCS_URL = "https://github.com/replaybook/replaybook/blob/v{version}/docs/install.md"
IGNORED = ".replaybook/"  # local caches, traces and the journal: never committed


def docs_url() -> str:
    """The install guide of the installed version (a pip user has no docs/ folder)."""
    return DOCS_URL.format(version=version())


def ignore_local_state(root: Path) -> Change:
    """``.replaybook/`` added to ``root/.gitignore``, every line there kept; empty when it is already ignored."""
    path = Path(root) / ".gitignore"
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    if any(line.strip() in (IGNORED, IGNORED.rstrip("/"), "/" + IGNORED, "/" + IGNORED.rstrip("/"))
           for line in text.splitlines()):
        return Change()
    return Change({".gitignore": text + ("" if not text or text.endswith("\n") else "\n") + IGNORED + "\n"})


def body_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def header(kind: str, body: str, at_version: str) -> str:
    note = (f"Written by `replaybook init` {at_version} (sha256:{body_hash(body)}). "
            "`replaybook init` updates this file only while it is unchanged; once edited, it is yours.")
    return _COMMENT[kind].format(note).rstrip() + "\n"


def split_header(text: str) -> tuple[str | None, str | None, str]:
    """(version, recorded hash, body) of a managed file; (None, None, text) when it has no header."""
    first, newline, rest = text.partition("\n")
    match = _HEADER.search(first)
    if not match or not newline:
        return None, None, text
    return match.group(1), match.group(2), rest


@dataclass(frozen=True)
class Planned:
    """One file init owns: where, what it should hold, and what init will do to it."""

    path: str  # relative to the root, with forward slashes
    text: str
    managed: bool
    state: State
    found_version: str | None = None

    @property
    def what(self) -> str:
        if self.state == "stale" and self.found_version and self.found_version != version():
            return f"updated from {self.found_version}"
        return _WHAT[self.state]


@dataclass(frozen=True)
class Plan:
    root: Path
    files: list[Planned]

    @property
    def needs_work(self) -> list[Planned]:
        return [f for f in self.files if f.state in NEEDS_WORK]

    @property
    def conflicts(self) -> list[Planned]:
        return [f for f in self.files if f.state == "conflict"]

    @property
    def change(self) -> Change:
        """What init writes, as one Change: every file that needs work, and ``.replaybook/`` in .gitignore."""
        return Change({f.path: f.text for f in self.needs_work}) | ignore_local_state(self.root)

    def report(self, *, done: bool) -> str:
        """A markdown table of every file; ``done`` says the writes happened."""
        rows = [[f"`{f.path}`", f.state, f.what if done or f.state not in NEEDS_WORK else _pending(f)]
                for f in self.files]
        return table(["file", "state", "init" if not done else "done"], rows)


def _pending(f: Planned) -> str:
    return {"missing": "would write it", "stale": "would update it",
            "conflict": "would refuse: changed by hand (--force overwrites it)"}[f.state]


# ------------------------------------------------------------------ what to write


def watched_workflows(root: Path) -> tuple[list[str], bool]:
    """Names of the repository's own workflows, for ``workflow_run``; (["CI"], False) when there are none."""
    names = set()
    folder = root / ".github" / "workflows"
    for file in sorted([*folder.glob("*.yml"), *folder.glob("*.yaml")]) if folder.is_dir() else []:
        try:
            data = yamlfile.load(file, what="workflow").data
        except BadInput:
            data = None  # not ours to judge (actionlint is): known by its file name
        name = data.get("name") if isinstance(data, dict) else None
        name = name if isinstance(name, str) and name.strip() else file.name
        if not name.lower().startswith(BOT_PREFIX) and not file.name.lower().startswith(BOT_PREFIX):
            names.add(name)
    return (sorted(names), True) if names else (["CI"], False)


def agent_files(root: Path) -> list[str]:
    """The render targets (hosts) whose main instruction file exists in ``root`` (CLAUDE.md: claude, AGENTS.md:
    agents, …): init records them in ``render:`` so `playbook render` keeps them and `playbook check` checks them."""
    from bot.playbook.render.hosts import HOSTS

    return [host.name for host in HOSTS.values() if (Path(root) / host.main).is_file()]


def check_watched(root: Path, watched: list[str]) -> None:
    """``BadInput`` naming the workflows present when a ``--watch`` name is none of them (GitHub matches
    ``workflow_run`` by the workflow's ``name:``, or its file name when it has none). With no workflow yet,
    any name is taken: the workflow may come later."""
    present, found = watched_workflows(root)
    if not found:
        return
    known = {name.lower() for name in present}
    unknown = [name for name in watched if name.lower() not in known]
    if unknown:
        raise BadInput(f"--watch {', '.join(repr(n) for n in unknown)}: no workflow in {root / '.github' / 'workflows'} "
                       f"has that name; the workflows there are: {', '.join(present)} (a workflow's `name:`, else its "
                       "file name). Nothing was written")


def repository_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git`` (a folder, or a file for a worktree or a
    submodule): where GitHub reads ``.github/workflows``. Found by walking up; git is never run."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def actions_commit(explicit: str | None = None) -> str:
    """The commit to pin the actions to: ``explicit``, else $REPLAYBOOK_ACTIONS_SHA, else the release's,
    else the commit this build was made from (bot/_util/build_info.py)."""
    sha = explicit or settings.get(ACTIONS_SHA_ENV) or RELEASE_COMMITS.get(version()) or _built_from()
    if sha is None:
        raise BadInput(f"Replaybook {version()} records no commit for its actions (not built from a git checkout); "
                       f"pass --actions-sha with the 40-hex commit of tag v{version()} of {ACTIONS_REPO} (or set "
                       f"{ACTIONS_SHA_ENV}), or install a build made from a checkout: workflows pin actions to a "
                       "commit, never to a tag")
    if not _COMMIT.match(sha):
        raise BadInput(f"--actions-sha {sha!r} is not a full commit id; give all 40 lowercase hex digits")
    return sha


def _built_from() -> str | None:
    from bot._util.build_info import build_commit

    built = build_commit()
    if built is None:
        return None
    if built.dirty:
        raise BadInput(f"Replaybook {version()} was built from commit {built.commit[:12]} with uncommitted changes "
                       f"({built.source}): the actions at that commit are not what this build runs. Commit and "
                       f"rebuild, or pass --actions-sha with the commit whose actions to use (or set {ACTIONS_SHA_ENV})")
    return built.commit


def pin_comment(sha: str) -> str:
    """What the comment after a pinned ``uses:`` says: the tag at ``sha`` when this build knows it (its
    release's commit, or the tag recorded with the commit it was built from), else ``untagged``.

    Renovate and Dependabot read the comment as the pinned version, so it never names a tag the commit
    is not known to carry."""
    from bot._util.build_info import build_commit

    if RELEASE_COMMITS.get(version()) == sha:
        return f"v{version()}"
    built = build_commit()
    return built.tag if built is not None and built.commit == sha and built.tag else "untagged"


GATE_CHECKOUT = ".replaybook-gate"  # where this repository's own admit workflow checks out the base's code


def uses(local_actions: bool, sha: str | None = None) -> dict[str, str]:
    if local_actions:  # this repository's own workflows: the actions of the same commit
        # but the gate's, which is the base branch's, checked out beside the PR (the admit template)
        local = {name: f"./{GATE_CHECKOUT}/actions/{name}" if name == "admit" else f"./actions/{name}"
                 for name in (*ACTIONS, "org")}
        return {**local, "org_gate": f"./{GATE_CHECKOUT}/actions/org"}  # the org gate judges from the base too
    sha = actions_commit(sha)
    remote = {name: f"{ACTIONS_REPO}/actions/{name}@{sha}" for name in (*ACTIONS, "org")}
    return {**remote, "org_gate": remote["org"]}


def render(root: Path, *, local_actions: bool = False, watched: list[str] | None = None,
           settings: config_mod.Settings | None = None, actions_sha: str | None = None) -> list[tuple[str, str, bool]]:
    """(path, text, managed) of every file init writes for ``root``; managed texts carry their header."""
    settings = settings or _settings(root)
    cfg = settings.config
    found = True
    if not watched:
        watched, found = watched_workflows(root)
    at = version()
    pinned_uses = uses(local_actions, actions_sha)
    # Remote: the commit, named by its tag in a comment (or `untagged`). Local: `./` rather than `$/`, which
    # runners do not all support yet.
    pin_note = ("  # zizmor: ignore[self-repository] the actions of this same commit" if local_actions
                else f" # {pin_comment(pinned_uses['capture'].rsplit('@', 1)[1])}")
    gate_note = ("  # zizmor: ignore[self-repository] the base branch's actions, checked out above" if local_actions
                 else pin_note)
    context = {"version": at, "pin_note": pin_note, "gate_note": gate_note, "actions_repo": ACTIONS_REPO,
               "uses": pinned_uses, "local_actions": local_actions, "watched": watched,
               "watched_found": found, "incident_label": cfg.labels.incident, "scenarios_dir": cfg.paths.scenarios,
               "agent_model": cfg.models.agent, "playbook_dir": cfg.paths.playbook.strip("/"),
               "defaults": config_mod.Config(),
               "render_targets": agent_files(root),  # seeded once, with .replaybook.yml
               "trials_budget": SequentialTest().after_n,
               "app_environment": APP_ENVIRONMENT,  # where the App's key lives (doctor checks its branch policy)  # `/replaybook replay --trials N`: 1..this
               # a member pinned to an org repository: its admit and distill jobs check the tier out (docs/org.md)
               "org_repo": bool(cfg.org is not None and cfg.org.repo)}
    out: list[tuple[str, str, bool]] = []

    def managed(path: str, template: str, kind: str) -> None:
        body = _templates.get_template(template).render(**context)
        out.append((path, header(kind, body, at) + body, True))

    for name in ACTIONS:
        managed(WORKFLOWS[name], f"replaybook-{name}.yml.j2", "yaml")
    managed(ISSUE_FORM, "incident.yml.j2", "yaml")
    pinned = [{"name": name, "repo": m.repo, "ref": m.ref} for name, m in
              (cfg.org_tier.members.items() if cfg.org_tier else ()) if m.repo]
    if pinned:  # an org repository: its gate fans out over the members pinned on GitHub
        context["members"] = pinned
        managed(ORG_WORKFLOW, "replaybook-org-admit.yml.j2", "yaml")
        managed(ORG_PROMOTE_WORKFLOW, "replaybook-org-promote.yml.j2", "yaml")
    out.append((f"{cfg.paths.scenarios}/README.md", _templates.get_template("scenarios-README.md.j2").render(**context),
                False))
    out.append((config_mod.FILENAME, _templates.get_template("replaybook.yml.j2").render(**context), False))
    playbook = cfg.paths.playbook.strip("/")
    out.append((f"{playbook}/PLAYBOOK.md", _empty_playbook(root / playbook), False))
    for state in ("rules", "archive"):
        out.append((f"{playbook}/{state}/.gitkeep", "", False))
    return out


def _empty_playbook(folder: Path) -> str:
    from bot.playbook.store import Playbook

    return Playbook(folder, root=folder.parent).render_text([])


def _settings(root: Path) -> config_mod.Settings:
    return config_mod.load(root)  # an existing .replaybook.yml decides the folders and labels; broken: BadInput


# ------------------------------------------------------------------ deciding and writing


def _state(root: Path, path: str, text: str, managed: bool) -> tuple[State, str | None]:
    target = root / path
    if path.endswith("/.gitkeep"):
        return ("present", None) if target.parent.is_dir() else ("missing", None)
    if not target.exists():
        return "missing", None
    if not managed:
        return "present", None
    try:
        current = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "conflict", None
    if current == text:
        return "current", None
    found_version, recorded, body = split_header(current)
    _, wanted, _ = split_header(text)
    if recorded == wanted and body_hash(body) == recorded:
        return "current", found_version  # only the version in the header differs: nothing to update
    if recorded is None or body_hash(body) != recorded:
        # Edited by hand (or never ours). Leave it, unless init would now write something else.
        return ("modified" if recorded == wanted else "conflict"), found_version
    return "stale", found_version


def plan(root: Path, *, local_actions: bool = False, watched: list[str] | None = None,
         actions_sha: str | None = None) -> Plan:
    """What init would do in ``root``; writes nothing."""
    root = Path(root)
    if not root.is_dir():
        raise BadInput(f"{root}: not a folder; pass the root of the repository to set up")
    root = root.resolve()
    if watched:
        check_watched(root, watched)
    files = []
    for path, text, managed in render(root, local_actions=local_actions, watched=watched, actions_sha=actions_sha):
        state, found = _state(root, path, text, managed)
        files.append(Planned(path, text, managed, state, found))
    return Plan(root, files)


def apply(the_plan: Plan, *, force: bool = False) -> Plan:
    """Write what ``the_plan`` needs; BadInput (nothing written) when a changed file would be overwritten."""
    if the_plan.conflicts and not force:
        names = ", ".join(f.path for f in the_plan.conflicts)
        raise BadInput(f"{len(the_plan.conflicts)} file(s) were changed by hand since `replaybook init` wrote them, "
                       f"and init has a newer version: {names}. Nothing was written. Merge your change by hand, or "
                       "rerun with --force to overwrite them (your changes are lost)",
                       problems=[f"{f.path}: changed by hand" for f in the_plan.conflicts])
    with locked(the_plan.root):
        apply_local(the_plan.change, the_plan.root)
    return the_plan


def manifest(the_plan: Plan) -> str:
    """The plan as JSON (for ``--json``)."""
    return json.dumps({"root": str(the_plan.root), "version": version(),
                       "files": [{"path": f.path, "state": f.state, "managed": f.managed, "what": f.what,
                                  "found_version": f.found_version} for f in the_plan.files]}, indent=2)


__all__ = ["ACTIONS_REPO", "ISSUE_FORM", "WORKFLOWS", "Plan", "Planned", "apply", "header", "plan", "render",
           "split_header", "version", "watched_workflows"]

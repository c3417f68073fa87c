"""What a pull request changes in what agents are told, judged by meaning rather than by file status.

The admitted playbook of the PR's result is compared with the base's, rule by
rule, after parsing: every field of a rule (its id, text, scope, replay,
citations…) and the files of the scenario it replays. Only a ``last_hit``
that moved is bookkeeping; anything else an agent would see differently is
replayed by the gate, whatever git calls the change (added, modified,
renamed, type-changed). Symlinks and submodules under the playbook or the
scenarios are refused: a link could make the gate read one text and agents
another.

The paths are read from each side's own ``.replaybook.yml``, so a PR that
moves ``paths.playbook`` is judged on the folder its result will use.
Everything is read from git objects (``git show``, ``git ls-tree``), never
from a path the PR could point elsewhere.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from bot import config as config_mod
from bot import settings
from bot._util import records, yamlfile
from bot.errors import BadInput
from bot.playbook.rule import Rule
from bot.replay.sandbox.host_tools import GIT_HARDENED

_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_LINK_MODES = {"120000": "a symlink", "160000": "a submodule"}
BOOKKEEPING_FIELDS = frozenset({"last_hit", "hits"})


@dataclass
class Meaning:
    """The meaning of one PR: which head rule files must be replayed, and why nothing else needs to be."""

    gated: list[str] = field(default_factory=list)  # head paths of rule files to replay
    bookkeeping: list[str] = field(default_factory=list)  # rule ids whose only change is last_hit
    removed: list[str] = field(default_factory=list)  # rule ids no longer admitted
    refused: list[str] = field(default_factory=list)  # problems that fail the gate outright
    why: dict[str, str] = field(default_factory=dict)  # head path -> what changed
    head_count: int = 0  # admitted rule files at the head
    fork_point: str = ""  # where the PR left the base (their merge base)
    scenarios: list[str] = field(default_factory=list)  # suite scenario folders new or changed (fixture included)
    base_config: Any = None  # bot.config.Config of the base commit
    head_config: Any = None


def _git_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in settings.environ().items() if not k.startswith("GIT_")}
    return {**env, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_CEILING_DIRECTORIES": str(Path(root).resolve().parent), "GIT_TERMINAL_PROMPT": "0"}


class Git:
    """``git`` in ``root``, argv only; a failure is ``BadInput`` naming the command."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def __call__(self, *args: str, check: bool = True) -> bytes:
        # The PR's checkout is data: git reads its objects with none of its hooks, fsmonitor, attributes or
        # system/global config taking part (``GIT_HARDENED``), and finds no other repository than root's own.
        if args and args[0] in ("diff", "log", "show"):  # a diff driver or textconv names a command
            args = (args[0], "--no-ext-diff", "--no-textconv", *args[1:])
        done = subprocess.run(["git", "--no-pager", *GIT_HARDENED, *args], cwd=self.root, capture_output=True,
                              timeout=120, env=_git_env(self.root))
        if done.returncode != 0 and check:
            raise BadInput(f"git {args[0]} failed ({done.returncode}): "
                           f"{done.stderr.decode('utf-8', 'replace').strip()[-300:]}")
        return done.stdout if done.returncode == 0 else b""

    def tree(self, commit: str, path: str) -> dict[str, tuple[str, str]]:
        """Every entry under ``path`` at ``commit``: relative path -> (mode, object id)."""
        out = self("ls-tree", "-r", "-z", "--full-tree", commit, "--", path, check=False)
        entries = {}
        for item in out.decode("utf-8", "replace").split("\0"):
            if item:
                meta, _, name = item.partition("\t")
                mode, _, sha = meta.split(" ")
                entries[name] = (mode, sha)
        return entries

    def show(self, commit: str, path: str) -> str | None:
        out = self("show", f"{commit}:{path}", check=False)
        return out.decode("utf-8", "replace") if out else None


class GitTree:
    """The files of one commit, read from git objects (a :class:`bot.change.Tree`); links are not files."""

    def __init__(self, git: Git, commit: str):
        self.git, self.commit = git, commit

    def read(self, path: str) -> str | None:
        entry = self.git.tree(self.commit, path).get(path)
        if entry is None or entry[0] in _LINK_MODES:
            return None
        return self.git.show(self.commit, path)

    def list(self, folder: str) -> list[str]:
        folder = folder.strip("/")
        return sorted(p for p, (mode, _) in self.git.tree(self.commit, folder).items()
                      if mode not in _LINK_MODES and p.startswith(folder + "/")
                      and not any(x.startswith(".") for x in p[len(folder) + 1:].split("/")))


def commit_id(value: str | None, what: str) -> str:
    if not _SHA.match(value or ""):
        raise BadInput(f"{what} {value!r} is not a commit id")
    return str(value)


def config_at(git: Git, commit: str) -> Any:
    """``.replaybook.yml`` of ``commit`` (defaults when it has none); BadInput when it does not parse."""
    text = git.show(commit, config_mod.FILENAME)
    if text is None:
        return config_mod.Config()
    doc = yamlfile.parse(Path(f"{commit[:12]}:{config_mod.FILENAME}"), text, what="config file")
    return records.from_document(config_mod.Config, doc, what="config")


def _folder(value: str) -> str:
    return PurePosixPath(value.strip("/") or ".").as_posix()


def _rules_at(git: Git, commit: str, playbook: str) -> tuple[dict[str, str], list[str]]:
    """Admitted rule files at ``commit`` (path -> text), as the playbook reads them, and refused links."""
    rules_dir = f"{_folder(playbook)}/rules/"
    files, refused = {}, []
    for name, (mode, _) in git.tree(commit, _folder(playbook)).items():
        if mode in _LINK_MODES:
            refused.append(f"{name} is {_LINK_MODES[mode]}; the playbook holds plain files only")
            continue
        rel = name[len(rules_dir):] if name.startswith(rules_dir) else None
        if rel and "/" not in rel and rel.endswith(".yaml") and not rel.startswith("."):
            files[name] = git.show(commit, name) or ""
    return files, refused


def _parse(path: str, text: str) -> Rule | None:
    try:
        doc = yamlfile.parse(Path(path), text, what="rule")
        rule = Rule.model_validate(doc.data)
    except (BadInput, ValidationError):
        return None
    return rule if PurePosixPath(path).stem == rule.id else None


def _refused_text(path: str, text: str) -> list[str]:
    """Why the rule text of a file that does not parse is refused as text agents would obey (bot.playbook.rule_text)."""
    from bot.playbook import rule_text

    try:
        value = (yamlfile.parse(Path(path), text, what="rule").data or {}).get("rule")
    except (BadInput, AttributeError):
        return []
    if not isinstance(value, str):
        return []
    return [f"{path}: field `rule`: {p}" for p in rule_text.problems(" ".join(value.split()))]


def _scenario_folders(git: Git, commit: str, folder: str) -> list[str]:
    """The scenario folder and every folder outside it that its replay reads: the fixture however it is reached
    (``repo: ../shared/repo``). ``policy.yaml`` sits in the folder; ``requirements_file`` and setup files in the
    fixture; services in ``scenario.yaml``."""
    folders = [folder]
    text = git.show(commit, f"{folder}/scenario.yaml")
    try:
        data = yamlfile.parse(Path(f"{folder}/scenario.yaml"), text, what="scenario").data if text else None
    except BadInput:
        data = None
    repo = data.get("repo", "repo") if isinstance(data, dict) else "repo"
    if isinstance(repo, str) and repo.strip():
        fixture = posixpath.normpath(f"{folder}/{repo.strip()}")
        if not fixture.startswith("../") and fixture != ".." and not fixture.startswith("/") \
                and fixture != folder and not fixture.startswith(folder + "/"):
            folders.append(fixture)
    return folders


def _scenario_digest(git: Git, commit: str, replay: str) -> tuple[str, list[str], list[str]]:
    """A digest of every file the scenario ``replay`` reads at ``commit``, refused links in them, and its folders."""
    folder = _folder(replay)
    if folder.startswith("../") or folder == ".." or PurePosixPath(folder).is_absolute():
        return f"outside:{folder}", [], [folder]
    folders = _scenario_folders(git, commit, folder)
    listing, refused = [], []
    for where in folders:
        entries = git.tree(commit, where)
        refused += [f"{name} is {_LINK_MODES[mode]}; a scenario holds plain files only"
                    for name, (mode, _) in entries.items() if mode in _LINK_MODES]
        listing += [f"{where}\t{mode} {sha} {name}" for name, (mode, sha) in sorted(entries.items())]
    return hashlib.sha256("\n".join(listing).encode()).hexdigest(), refused, folders


def _changed_scenarios(git: Git, fork_point: str, head: str, suite: str) -> list[str]:
    """Every scenario folder of the head's suite whose files (its fixture however reached) differ from the fork
    point's: what the gate validates, do-nothing control included, before any of them proves or judges a rule."""
    names = {PurePosixPath(p).parent.as_posix() for p in git.tree(head, suite)
             if PurePosixPath(p).name == "scenario.yaml" and PurePosixPath(p).parent.parent.as_posix() == suite}
    return sorted(n for n in names if not any(x.startswith(".") for x in n.split("/"))
                  and _scenario_digest(git, head, n)[0] != _scenario_digest(git, fork_point, n)[0])


def _meaning(rule: Rule) -> dict[str, Any]:
    data = rule.model_dump(mode="json")
    return {k: v for k, v in data.items() if k not in BOOKKEEPING_FIELDS}


def _difference(old: Rule, new: Rule) -> list[str]:
    a, b = _meaning(old), _meaning(new)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def playbook_change(git: Git, base: str, head: str = "HEAD") -> Meaning:
    """What ``head`` changes, against where it left ``base`` (their merge base), in what agents are told."""
    base = commit_id(base, "base sha")
    fork_point = git("merge-base", base, head).decode().strip() or base
    change = Meaning(base_config=config_at(git, base), fork_point=fork_point)
    try:
        change.head_config = config_at(git, head)
    except BadInput as exc:  # a PR whose result cannot be read cannot be judged: refused, naming why
        change.refused = ["the PR's " + (exc.problems[0] if exc.problems else exc.message)]
        return change
    old_files, _ = _rules_at(git, fork_point, config_at(git, fork_point).paths.playbook)
    new_files, refused = _rules_at(git, head, change.head_config.paths.playbook)
    scenarios = _folder(change.head_config.paths.scenarios)
    change.refused += refused + [f"{name} is {_LINK_MODES[mode]}; scenarios hold plain files only"
                                 for name, (mode, _) in git.tree(head, scenarios).items() if mode in _LINK_MODES]
    change.head_count = len(new_files)
    old = {r.id: r for r in (_parse(p, t) for p, t in old_files.items()) if r is not None}
    seen: set[str] = set()
    for path, text in sorted(new_files.items()):
        rule = _parse(path, text)
        change.refused += _refused_text(path, text) if rule is None else []
        if rule is None or rule.id in seen:
            change.gated.append(path)
            change.why[path] = "does not parse as an admitted rule" if rule is None else f"a second {rule.id}"
            continue
        seen.add(rule.id)
        before = old.get(rule.id)
        digest, links, folders = _scenario_digest(git, head, rule.replay)
        change.refused += links
        if before is None:
            change.gated.append(path)
            change.why[path] = "new in the playbook"
            continue
        fields = _difference(before, rule)
        if digest != _scenario_digest(git, fork_point, before.replay)[0]:
            fields.append(f"the files its scenario replays ({', '.join(folders)})")
        if fields:
            change.gated.append(path)
            change.why[path] = "changed: " + ", ".join(fields)
        elif (before.last_hit, before.hits) != (rule.last_hit, rule.hits):
            change.bookkeeping.append(rule.id)
    change.removed = sorted(set(old) - seen)
    change.scenarios = _changed_scenarios(git, fork_point, head, scenarios)
    change.refused = sorted(set(change.refused))
    return change

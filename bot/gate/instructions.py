"""Everything else a PR changes in what agents read: generated files, hand-written instructions, removed rules.

:mod:`bot.gate.playbook_diff` judges the rule files; this module judges the
rest, read from git objects like it:

- **generated content** (``PLAYBOOK.md``, the marked section of every render
  target and ``sections`` file, each per-rule scoped file, and the whole of a
  host's own file such as ``.cursor/rules/replaybook.mdc``) that the PR
  changes must equal the rendering of the PR's admitted rules, or the gate
  fails naming the file (fix: ``replaybook playbook render``). Content the PR
  leaves alone is not judged: rule PRs leave the rendering to the
  maintenance PR;
- **unproven instructions**: bytes outside the markers of a host's
  instruction file, or a new file in a host's rule folder, that the PR adds
  or changes. No replay proved them; the report names them, and
  ``gate.unproven_instructions`` (the base's) says whether that fails;
- **removed rules**: an admitted rule may leave ``rules/`` only for
  ``archive/``, stamped ``retired`` and ``retired_reason``, as
  ``replaybook playbook retire`` and the cap do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from bot import config as config_mod
from bot._util import yamlfile
from bot.errors import BadInput
from bot.gate.playbook_diff import _LINK_MODES, Git, GitTree, Meaning
from bot.playbook.render import hosts as hosts_mod
from bot.playbook.render import sync
from bot.playbook.rule import Rule
from bot.playbook.store import SECTION_END, SECTION_START, Playbook, section_block

RENDER_FIX = "run `replaybook playbook render` and commit what it writes (edit playbook/rules/, never the output)"
UNPROVEN = "instructions agents read that no replay proved"


@dataclass
class Findings:
    differs: list[str] = field(default_factory=list)   # generated content that is not its rendering: failure
    deleted: list[str] = field(default_factory=list)   # admitted rules removed without a retirement: failure
    unproven: list[str] = field(default_factory=list)  # hand-written instructions: report, or fail by the setting

    def failing(self, unproven_fails: bool) -> list[str]:
        return self.differs + self.deleted + (self.unproven if unproven_fails else [])


@dataclass(frozen=True)
class _Generated:
    """One file holding generated content: the block its section must hold, or the whole text it must be."""

    rel: str
    block: str | None = None          # the marked section, \n line endings
    prefix: str = ""                  # what a new file starts with (the host's front matter)
    whole: bool = False               # every byte is Replaybook's (the host's own file)
    wanted: bool = True               # False: a target only the base lists (the PR may drop its section)


def judge(git: Git, fork_point: str, head: str, change: Meaning) -> Findings:
    """What ``head`` changes, against ``fork_point``, in the instruction files agents read."""
    found = Findings()
    changed = _changed(git, fork_point, head)
    found.deleted = _deleted_rules(git, head, change)
    found.differs += _moved_pin(change)
    folder = change.head_config.paths.playbook.strip("/") or "."
    book = Playbook(folder, root=git.root, tree=GitTree(git, head))
    try:
        # The head's org tier too: its block is part of the rendering the PR's files must equal (docs/org.md).
        settings = config_mod.Settings(git.root, change.head_config, None)
        book = config_mod.playbook(settings, folder=folder, root=git.root, tree=GitTree(git, head))
        rules = book.admitted()
    except BadInput as exc:
        rules = None
        broken = exc.render().replace("\n", " ")
    generated = [] if rules is None else _generated(book, rules, change)
    handled = {book.rendered_rel} | {g.rel for g in generated}
    for rel in sorted(changed):
        head_entry = git.tree(head, rel).get(rel)
        if rules is None and (rel == book.rendered_rel or _is_host_file(rel)):
            found.differs.append(f"{rel}: cannot be checked against its rendering, the PR's playbook does not "
                                 f"load ({broken}); fix the rule files first")
            continue
        if head_entry is not None and head_entry[0] in _LINK_MODES and (rel in handled or _is_host_file(rel)):
            found.differs.append(f"{rel}: is {_LINK_MODES[head_entry[0]]}; instructions agents read are plain files")
            continue
        if rel == book.rendered_rel:
            text = git.show(head, rel)
            if text is not None and text != book.render_text(rules):
                found.differs.append(f"{rel}: differs from the rendering of playbook/rules/; {RENDER_FIX}")
            continue
        item = next((g for g in generated if g.rel == rel), None)
        if item is not None:
            _judge_generated(git, fork_point, head, item, found)
        elif head_entry is not None and _looks_generated(git, head, rel, change):
            found.differs.append(f"{rel}: looks generated by Replaybook but is no rendering of playbook/rules/ "
                                 f"(no admitted rule is scoped to it); {RENDER_FIX}")
        elif head_entry is not None and _is_host_file(rel):
            if not _section_is_a_rendering(git, head, rel, book, rules):
                found.differs.append(f"{rel}: holds a playbook section that is no rendering of playbook/rules/ (and "
                                     f"is no render target); {RENDER_FIX}, or add the file to `render:`")
            found.unproven.append(f"{rel}: {_why_unproven(rel, git.show(fork_point, rel) is None)}")
    found.differs += _over_limits(git, head, changed, handled | {g.rel for g in generated})
    return found


def _moved_pin(change: Meaning) -> list[str]:
    """A PR that adds or moves an ``org: {repo, ref}`` pin: the workflow checks out the base's pin (the PR never
    picks the tier its gate replays with), so the head's tier is not there to render against."""
    base, head = change.base_config.org, change.head_config.org
    if head is None or head.repo is None or (base is not None and (base.repo, base.ref) == (head.repo, head.ref)):
        return []
    was = f" from {base.label}" if base is not None else ""
    return [f".replaybook.yml: field `org`: the PR moves the org tier{was} to {head.label}; the gate reads the "
            "base's pin, never the PR's, so it cannot judge a rendering of the new tier: move the pin in a PR of "
            "its own that a maintainer reviews and merges (docs/org.md)"]


def _over_limits(git: Git, head: str, changed: set[str], generated: set[str]) -> list[str]:
    """Each changed file holding Replaybook's text that a host would cut or warn about (bot/playbook/render/limits.py):
    padding before the section would push the proven rules past the cut."""
    from bot.playbook.render import limits

    out = []
    for rel in sorted(changed):
        data = _bytes(git, head, rel)
        if data is None or not (rel in generated or SECTION_START.encode() in data):
            continue
        out += [f"{p} (the playbook's rules would be cut)" for p in limits.over(rel, data)]
    return out


def _changed(git: Git, fork_point: str, head: str) -> set[str]:
    out = git("diff", "--name-only", "-z", "--no-renames", fork_point, head, "--")
    return {p for p in out.decode("utf-8", "replace").split("\0") if p}


def _looks_generated(git: Git, head: str, rel: str, change: Meaning) -> bool:
    folders = {t.host.scoped_dir for t, _ in _targets(change) if t.host.scoped_dir}
    name = PurePosixPath(rel)
    if name.name.startswith(sync.SCOPED_PREFIX) and str(name.parent) in folders:
        return True
    return _is_host_file(rel) and sync.GENERATED in (git.show(head, rel) or "")[:4096]


def _section_is_a_rendering(git: Git, head: str, rel: str, book: Playbook, rules: list[Rule]) -> bool:
    """A host file that is no target (a renamed CLAUDE.md, say) may hold a playbook section only as rendered."""
    try:
        section, _ = _split(_bytes(git, head, rel), rel)
    except BadInput:
        return False
    if section is None:
        return True
    section = section.replace(b"\r\n", b"\n")
    candidates = [section_block(book.render_text(rules, heading="## Replaybook playbook"))]
    for host in hosts_mod.HOSTS.values():
        mine = [r for r in rules if sync.proven_for(r, host)]
        kept = [r for r in mine if not (host.scope and r.paths)]
        candidates.append((sync._OPEN + "\n" + book.render_text(kept, heading="## Replaybook playbook")
                           + SECTION_END).encode("utf-8"))
    return section in candidates


def _is_host_file(rel: str) -> bool:
    return hosts_mod.is_instructions(rel) or any(
        rel.startswith(f) or f"/{f}" in rel for f in hosts_mod.RULE_FOLDERS)


def _why_unproven(rel: str, new: bool) -> str:
    folder = next((f for f in hosts_mod.RULE_FOLDERS if rel.startswith(f) or f"/{f}" in rel), None)
    what = "new" if new else "changed"
    if folder:
        return f"{what} in the host rule folder {folder}, and not Replaybook's rendering"
    return f"{what}, a file agents read as instructions, written by hand"


def _targets(change: Meaning) -> list[tuple[hosts_mod.Target, bool]]:
    """The base's render targets, then those only the PR's config adds; each with whether the PR keeps it."""
    base = hosts_mod.parse_all(list(change.base_config.render))
    head = hosts_mod.parse_all(list(change.head_config.render))
    head_mains = {t.main for t in head}
    return [(t, t.main in head_mains) for t in base] + [(t, True) for t in head if t.main not in
                                                       {b.main for b in base}]


def _generated(book: Playbook, rules: list[Rule], change: Meaning) -> list[_Generated]:
    rules = sorted(rules, key=lambda r: r.id)
    out: list[_Generated] = []
    for target, wanted in _targets(change):
        host = target.host
        mine = [r for r in rules if sync.proven_for(r, host)]
        scoped = [r for r in mine if r.paths] if host.scope else []
        block = sync._OPEN + "\n" + book.render_text([r for r in mine if r not in scoped],
                                                     heading="## Replaybook playbook") + SECTION_END
        out.append(_Generated(target.main, block, host.new_prefix, whole=bool(host.new_prefix)
                              and target.main == host.main, wanted=wanted))
        if host.scoped_dir:
            for rule in scoped:
                rel = f"{host.scoped_dir}/{sync.SCOPED_PREFIX}{rule.id}{host.scoped_suffix}"
                out.append(_Generated(rel, None, sync.scoped_text(rule, host), whole=True))
            out += [_Generated(f"{host.scoped_dir}/{sync.SCOPED_PREFIX}{r.id}{host.scoped_suffix}", None, "",
                               whole=True, wanted=False) for r in rules if r not in scoped]
    mains = {g.rel for g in out}
    block = section_block(book.render_text(rules, heading="## Replaybook playbook")).decode("utf-8")
    for rel in {*change.base_config.sections, *change.head_config.sections}:
        rel = PurePosixPath(rel).as_posix()
        if rel not in mains:
            out.append(_Generated(rel, block, wanted=rel in change.head_config.sections))
    return out


def _split(data: bytes | None, rel: str) -> tuple[bytes | None, bytes | None]:
    """(the marked section, everything else with a placeholder where the section was); None for no file."""
    if data is None:
        return None, None
    start_m, end_m = SECTION_START.encode(), SECTION_END.encode()
    if data.count(start_m) > 1 or data.count(end_m) > 1:
        raise BadInput(f"{rel}: holds more than one playbook section marker; keep one start and one end")
    start = data.find(start_m)
    end = data.find(end_m, max(start, 0))
    if start < 0 and end < 0:
        return None, data
    if start < 0 or end < 0:
        raise BadInput(f"{rel}: has one playbook section marker without the other; restore both")
    return data[start:end + len(end_m)], data[:start] + b"\0SECTION\0" + data[end + len(end_m):]


def _bytes(git: Git, commit: str, rel: str) -> bytes | None:
    text = git.show(commit, rel)
    return None if text is None else text.encode("utf-8")


def _judge_generated(git: Git, fork_point: str, head: str, item: _Generated, found: Findings) -> None:
    new, old = _bytes(git, head, item.rel), _bytes(git, fork_point, item.rel)
    if item.block is None:  # a per-rule scoped file: wholly Replaybook's
        if new is not None and (not item.wanted or new != item.prefix.encode()):
            found.differs.append(f"{item.rel}: differs from the rendering of playbook/rules/ (a generated path-scoped "
                                 f"rule file); {RENDER_FIX}")
        return
    try:
        (sec_new, out_new), (sec_old, out_old) = _split(new, item.rel), _split(old, item.rel)
    except BadInput as exc:
        found.differs.append(f"{exc.message}; {RENDER_FIX}")
        return
    if new is None:
        return  # the file is gone: agents read less, and the maintenance PR renders it again if it is still wanted
    eol = b"\r\n" if b"\r\n" in new else b"\n"
    if sec_new != sec_old:
        if sec_new is None and not item.wanted:
            pass  # the PR drops the target from its config and its section with it
        elif sec_new not in (item.block.encode("utf-8").replace(b"\n", eol), item.block.encode("utf-8")):
            what = "its playbook section was removed" if sec_new is None else \
                "its playbook section differs from the rendering of playbook/rules/"
            found.differs.append(f"{item.rel}: {what}; {RENDER_FIX}")
    if out_new != out_old:
        fresh = _split(sync.splice(None, item.block, item.rel, item.prefix), item.rel)[1]
        if old is None and out_new == fresh:
            return  # a new file exactly as `playbook render` creates it
        if item.whole:
            found.differs.append(f"{item.rel}: Replaybook writes this whole file, and the PR changed it outside the "
                                 f"playbook markers; {RENDER_FIX}, and put your own instructions in a file of your own")
        else:
            found.unproven.append(f"{item.rel}: changed outside the playbook markers")


def _deleted_rules(git: Git, head: str, change: Meaning) -> list[str]:
    """Each rule admitted at the fork point and gone from ``rules/`` without a retirement into ``archive/``."""
    folder = change.head_config.paths.playbook.strip("/") or "."
    out = []
    for rule_id in change.removed:
        if git.show(head, f"{folder}/rules/{rule_id}.yaml") is not None:
            continue  # still there, and no longer parses: gated as a changed rule
        rel = f"{folder}/archive/{rule_id}.yaml"
        why = None
        text = git.show(head, rel)
        if text is None:
            why = "was removed from rules/"
        else:
            try:
                data = yamlfile.parse(Path(rel), text, what="rule").data or {}
            except BadInput:
                data = {}
            missing = [k for k in ("retired", "retired_reason") if not str((data or {}).get(k) or "").strip()]
            if data.get("id") != rule_id:
                why = f"was moved to {rel}, which does not hold it"
            elif missing:
                why = f"was moved to {rel} without {' and '.join(f'`{m}`' for m in missing)}"
        if why:
            out.append(f"{rule_id}: an admitted rule {why}; a rule leaves the playbook only by retirement: "
                       f"`replaybook playbook retire {rule_id} --reason WHY` moves it to {folder}/archive/ "
                       "with the date and the reason")
    return out


__all__ = ["Findings", "UNPROVEN", "judge"]

"""Rendering the playbook for every host (``render:`` in .replaybook.yml).

``sync`` plans and writes each host's files; ``limits`` holds each host's
documented size limit; ``hosts`` names the hosts and their file formats.
"""

from __future__ import annotations

from pathlib import Path

from bot.change import Change
from bot.errors import BadInput
from bot.playbook.render import limits, sync
from bot.playbook.render.hosts import HOSTS, Target, parse_all
from bot.playbook.render.sync import FileChange
from bot.playbook.store import Playbook

__all__ = ["HOSTS", "FileChange", "Target", "check", "render", "targets", "warnings"]


def targets(specs: list[str]) -> list[Target]:
    return parse_all(list(specs))


def _limit_problems(changes: list[FileChange], root: Path) -> list[str]:
    per_file = [p for c in changes if c.new is not None for p in limits.over(c.rel, c.new)]
    return per_file + limits.agents_chains(Path(root), {c.rel: c.new for c in changes})


def render(book: Playbook, root: Path, specs: list[str], *, write: bool = True) -> list[FileChange]:
    """Bring every target's files in sync; refuse (``BadInput``, nothing written) when one would pass a limit."""
    changes = sync.plan(book, Path(root), targets(specs))
    problems = _limit_problems(changes, root)
    if problems:
        raise BadInput(f"rendering would pass {len(problems)} host limit(s); nothing was written", problems=problems)
    changed = [c for c in changes if c.changed]
    if write:
        if Path(root).resolve() != book.root.resolve():
            raise ValueError(f"render writes through the playbook's sink, whose root is {book.root}, not {root}")
        book.apply(change(changed))
    return changed


def change(files: list[FileChange]) -> Change:
    """The rendered files as a :class:`~bot.change.Change`, for either sink (a target must be UTF-8 text)."""
    out: dict[str, str | None] = {}
    for file in files:
        try:
            out[file.rel] = None if file.new is None else file.new.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput(f"{file.rel}: is not UTF-8 text; a render target's file must be UTF-8") from None
    return Change(out)


def check(book: Playbook, root: Path, specs: list[str], sections: list[Path] = ()) -> list[str]:
    """Every render problem, one line each: stale files, passed limits, broken markers, a file rendered twice."""
    root = Path(root)
    try:
        changes = sync.plan(book, root, targets(specs))
    except BadInput as exc:
        return [exc.render()]
    problems = []
    mains = {c.rel for c in changes}
    for file in sections:
        rel = Path(file).resolve().relative_to(root.resolve()).as_posix() if Path(file).resolve().is_relative_to(
            root.resolve()) else str(file)
        if rel in mains:
            problems.append(f"{rel}: is both in `sections` and a `render` target of .replaybook.yml; keep it in one")
        elif Path(file).exists():
            problems += limits.over(rel, Path(file).read_bytes())
    for change in changes:
        if change.changed:
            what = "should be removed" if change.new is None else "is out of sync with playbook/rules/"
            problems.append(f"{change.rel}: {what} (render target `{change.target}`); run `replaybook playbook render`")
    return problems + _limit_problems(changes, root)


def warnings(book: Playbook, root: Path, specs: list[str], sections: list[Path] = ()) -> list[str]:
    """Each rendered file (or Codex chain) near a host's limit but not past it, one line each."""
    root = Path(root)
    try:
        changes = sync.plan(book, root, targets(specs))
    except BadInput:
        return []  # ``check`` reports it
    out = [w for c in changes if c.new is not None for w in limits.near(c.rel, c.new)]
    for file in sections:
        path = Path(file)
        if path.exists() and path.resolve().is_relative_to(root.resolve()):
            out += limits.near(path.resolve().relative_to(root.resolve()).as_posix(), path.read_bytes())
    rendered = {c.rel: c.new for c in changes}
    return out + limits.agents_chains_near(root, rendered) + limits.agents_overridden(root, rendered)

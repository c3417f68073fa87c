"""``playbook check``, in one place for the CLI and the push check on GitHub: ids, the cap, citations,
rendering for every host, and each admitted rule's scenario sound."""

from __future__ import annotations

from pathlib import Path

from bot.errors import BadInput
from bot.playbook import render
from bot.playbook import rule as rules_mod
from bot.playbook.store import STATES, Playbook
from bot.replay import validate as sv
from bot.replay.cache import ReplayCache
from bot.scenario import leakage
from bot.scenario import spec as sc


def problems(book: Playbook, root: Path, specs: list[str], sections: list[Path], *, cache_dir: Path | None,
             control: bool = True) -> list[str]:
    """Every problem, one line each; the scenarios are validated once the rest holds (a broken playbook
    would report each scenario's rule again)."""
    found = book.check(sections)
    try:
        book.admitted()
    except BadInput:
        return found  # `book.check` listed why the rules do not load; rendering cannot be checked without them
    found += render.check(book, root, specs, sections) + stray_sections(book, root, specs, sections)
    return found or admitted_scenario_problems(book, cache_dir, control=control)


def stray_sections(book: Playbook, root: Path, specs: list[str], sections: list[Path]) -> list[str]:
    """Files agents read (each host's, e.g. CLAUDE.md, AGENTS.md, */CLAUDE.md) that carry the playbook's markers
    but are in neither ``sections`` nor ``render``: one whose section matches neither rendering (``--section`` or
    ``--target``) is stale, and agents read stale rules from it."""
    from bot.playbook.render import hosts
    from bot.playbook.store import SECTION_START

    root = Path(root)
    known = {Path(f).resolve() for f in sections} | {(root / t.main).resolve() for t in render.targets(specs)}
    problems: list[str] = []
    for host in hosts.HOSTS.values():
        for pattern in host.reads:
            for path in sorted(root.glob(pattern)):
                if path.resolve() in known or not path.is_file() or path.is_symlink():
                    continue
                known.add(path.resolve())
                if SECTION_START.encode() not in path.read_bytes():
                    continue
                rel = path.relative_to(root).as_posix()
                if not _stale(book, root, path, f"{host.name}:{rel}"):
                    continue
                target = host.name if rel == host.main else f"{host.name}:{rel}"
                problems.append(f"{rel}: holds a playbook section that is out of sync with playbook/rules/ (agents read "
                                f"it); run `replaybook playbook render --target {target}` (or `--section "
                                f"{rel}`), and add `{host.name}` to `render:` in .replaybook.yml so it stays in sync")
    return problems


def _stale(book: Playbook, root: Path, path: Path, spec: str) -> bool:
    """Neither the ``--section`` rendering nor the host target's matches the file's section."""
    from bot.playbook.render import sync

    try:
        if book.section_in_sync(path):
            return False
    except BadInput:
        pass
    try:
        return any(c.changed for c in sync.plan(book, root, render.targets([spec])) if c.rel == spec.split(":", 1)[1])
    except BadInput:
        return True


def warnings(book: Playbook, root: Path, specs: list[str], sections: list[Path]) -> list[str]:
    return render.warnings(book, root, specs, sections) + (book.org.warnings() if book.org is not None else [])


def validate_folders(folders: list[Path], book: Playbook, *, control: bool,
                     cache: ReplayCache | None, rule: str | None = None, policy: bool = True) -> list[sv.Finding]:
    """Validate each folder against the rules that may replay it: the playbook's, in every state, and the
    ``rule.yaml`` beside a scenario. Leakage is a warning: of each rule that replays the folder, of ``rule``
    (``scenario validate --rule``) when given, and of the scenario's own rule checks."""
    try:
        rules = [e.rule for e in book.entries(STATES)]
    except BadInput:
        rules = []  # `playbook check` reports a broken playbook; here it only costs the branch-text check
    empty = book.render_text([])
    beside: dict[Path, list] = {}
    broken: dict[Path, list[str]] = {}
    for folder in folders:
        try:
            beside[folder] = [rules_mod.load(folder / "rule.yaml", named_by_id=False)] \
                if (folder / "rule.yaml").is_file() else []
        except BadInput as exc:
            beside[folder], broken[folder] = [], exc.problems or [exc.message]
    suite_rules = [r for found in beside.values() for r in found]  # another scenario's rule may branch a policy
    findings = []
    for folder in folders:
        finding = sv.validate(folder, rules=rules + suite_rules, empty_playbook=empty, control=control, cache=cache,
                              policy=policy)
        finding.problems += broken.get(folder, [])
        if not finding.problems:
            own = [r for r in rules if r.replay and Path(r.replay).name == folder.name] + beside[folder]
            texts = [r.rule for r in own] + ([rule] if rule else [])
            finding.warnings += leak_warnings(folder, texts)
        findings.append(finding)
    return findings


def exit_code(findings: list[sv.Finding]) -> int:
    """What ``scenario validate`` exits with for ``findings``: 2 on a problem, 1 when only unsound, else 0."""
    return sv.exit_code(findings)


def leak_warnings(folder: Path, rules: list[str]) -> list[str]:
    """``leakage.find`` for each rule text (once each), and for the checks alone when no rule is known."""
    loaded = sc.load(folder)
    found = leakage.find(loaded) if not rules else [leak for text in dict.fromkeys(rules)
                                                     for leak in leakage.find(loaded, text)]
    return list(dict.fromkeys(leak.line() for leak in found))


def admitted_scenario_problems(book: Playbook, cache_dir: Path | None, *, control: bool = True) -> list[str]:
    """Every admitted and proposed rule's scenario must be sound (``control``: the do-nothing replay and the
    reference solution too, cached): a proposal whose scenario no agent can pass is no candidate. A proposal's
    scenario needs no simulated-model policy (a real model's distill writes none)."""
    cache = ReplayCache(cache_dir) if cache_dir else None

    def folders(rules: list) -> set[Path]:
        found = ((book.root / r.replay).resolve() for r in rules if r.replay)
        return {f for f in found if (f / "scenario.yaml").is_file()}
    admitted = folders(book.admitted())
    proposed = folders([e.rule for e in book.entries(("proposed",), skip_bad_candidates=True)]) - admitted
    findings = validate_folders(sorted(admitted), book, control=control, cache=cache)
    findings += validate_folders(sorted(proposed), book, control=control, cache=cache, policy=False)
    return [f"{f.folder}: scenario {f.scenario} cannot prove its rule: {line}" for f in findings for line in f.lines()]

def rule_scenario_problems(book: Playbook, rule: rules_mod.Rule, cache_dir: Path | None) -> list[str]:
    """Why ``rule``'s scenario cannot prove it (``rule validate``): the do-nothing control and the reference
    solution, replayed (cached). The simulated model's policy is not asked for: a real model needs none."""
    folder = book.root / rule.replay if rule.replay else None
    if folder is None or not (folder / "scenario.yaml").is_file():
        return []  # `book.vet` names a missing scenario; an org rule replays in its members
    finding = sv.validate(folder, control=True, policy=False, cache=ReplayCache(cache_dir) if cache_dir else None)
    return finding.lines()

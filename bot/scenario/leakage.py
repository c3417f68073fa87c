"""Leakage: a scenario whose task, fixture or checks already tell the agent what the rule says teaches nothing.

skill-eval-harness's name for it. A replay "without the rule" that hands the agent the rule anyway cannot show
the rule's worth: the agent passes either way (the gate reads it as "already followed") or, worse, the scenario
measures the hint and not the rule. Flagged, never refused: every finding names where, what and why, so a person
rewrites the task or the fixture (``scenario validate`` warns; the gate's report carries a ``leakage`` flag).

The measure, per sentence of each place the agent reads first (the task; the fixture's README, CONTRIBUTING,
AGENTS.md, CLAUDE.md and Copilot instructions; the comments of files the task names):

- **command**: a command the rule quotes in backticks (two words or more, or one with a flag or path) is written
  in it;
- **terms**: two or more of the rule's operative terms are in it: the paths, flags, files and commands of what
  the rule says to *do* (the part after its "when …," condition, less what the condition names, which a task may
  well state);
- **meaning**: it says what the rule's action says (``bot.model.meaning``: cosine of embeddings, or word overlap
  without the model, at ``LEAK_THRESHOLDS``).

And, without a rule: a check that proves the *rule's* behaviour (``ran``, ``not_ran``, ``max_runs``,
``diff_excludes``, ``output_excludes``) stated in the task: "run pytest in packages/api" beside
``ran: {command: pytest, cwd: packages/api}``. The checks that prove the *task* (``succeeds``, ``fails``) may be
stated: they are the goal ("make `python tools/lint.py` pass"), not how to reach it.

The fixture is data: each file is opened without following a link (``O_NOFOLLOW``, every folder on the way too),
must be a regular file, and only its first ``MAX_READ`` bytes are read. Nothing in it is run or quoted back
beyond the short matched terms.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from bot._util.similarity import terms
from bot.model import meaning
from bot.scenario import spec as sc

MAX_READ = 64 << 10
MAX_NAMED_FILES = 5
MAX_SENTENCES = 120  # per place: what an agent reads first is its opening; an embedding costs ~40 ms at load 20
DOCS = ("README.md", "README.rst", "README.txt", "README", "CONTRIBUTING.md", "AGENTS.md", "CLAUDE.md",
        ".github/copilot-instructions.md")
# Calibrated on the bundled scenarios (none flagged, the highest sentence scores sit below these; see bench/README.md).
LEAK_THRESHOLDS = {meaning.EMBEDDINGS: 0.75, meaning.WORDS: 0.5}
_CONDITION = re.compile(r"^\s*(?:when|whenever|before|after|if|once|while|on|for|in)\b[^,;:]*[,;:]", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*[-*#])")
_COMMENT = re.compile(r"^\s*(?:#|//|/\*|\*|--|;)\s?(.*)$")


@dataclass(frozen=True)
class Leak:
    """One place that tells the agent what the rule or a rule check says."""

    where: str  # "task", "README.md", "src/app.py (comments)", …
    how: str  # "command" | "terms" | "meaning" | "check"
    what: str  # the matched terms or score, short

    def line(self) -> str:
        return f"leakage: the {self.where} already says what the rule says ({self.how}: {self.what})"


def find(loaded: sc.LoadedScenario, rule: str | None = None, measure: meaning.Measure | None = None) -> list[Leak]:
    """Every leak of ``rule`` (when given) and of the scenario's rule checks into what the agent reads first."""
    task = loaded.scenario.task
    leaks = _check_leaks(loaded.scenario)
    if rule:
        places = [("task", task)] + _fixture_texts(loaded.fixture, task)
        leaks += _rule_leaks(rule, places, measure or meaning.default())
    return leaks


def operative(rule: str) -> tuple[set[str], set[str]]:
    """(commands quoted in the rule, operative terms of its action): what the rule says to do."""
    condition = _CONDITION.match(rule)
    action = rule[condition.end():] if condition else rule
    named = terms(condition.group(0)) if condition else set()
    commands = {c.strip().lower() for c in re.findall(r"`([^`]+)`", action)
                if len(c.split()) >= 2 or re.search(r"[-/.=]", c)}
    ops = {t for t in terms(action) if re.search(r"[./_=:-]", t) or t in _command_words(action)} - named
    return commands, ops


def _command_words(action: str) -> set[str]:
    return {w.lower() for c in re.findall(r"`([^`]+)`", action) for w in c.split()[:1]}


def _rule_leaks(rule: str, places: list[tuple[str, str]], measure: meaning.Measure) -> list[Leak]:
    commands, ops = operative(rule)
    condition = _CONDITION.match(rule)
    action = rule[condition.end():] if condition else rule
    limit = LEAK_THRESHOLDS[measure.method]
    leaks = []
    for where, text in places:
        for sentence in _sentences(text)[:MAX_SENTENCES]:
            low = " ".join(sentence.lower().split())
            hit = sorted(c for c in commands if c in low)
            if hit:
                leaks.append(Leak(where, "command", ", ".join(hit)))
                break
            shared = sorted(ops & terms(sentence))
            if len(shared) >= 2:
                leaks.append(Leak(where, "terms", ", ".join(shared)))
                break
            score = measure.similarity(sentence, action)
            if score >= limit:
                leaks.append(Leak(where, "meaning", f"{score:.2f} by {measure.method}"))
                break
    return leaks


def _check_leaks(scenario: sc.Scenario) -> list[Leak]:
    task = scenario.task.lower()
    task_terms = terms(scenario.task)
    leaks = []
    for check in scenario.pass_if:
        if isinstance(check, (sc.Ran, sc.NotRan, sc.MaxRuns)):
            match = check.model_dump().get(sc.check_name(check)) or {}
            command = str(match.get("command") or "").lower()
            where = [str(a).lower() for a in match.get("args") or []] + \
                ([str(match["cwd"]).lower()] if match.get("cwd") not in (None, ".") else [])
            if command and command in task_terms and where and all(w in task_terms for w in where):
                leaks.append(Leak("task", "check", f"{sc.check_name(check)} {command} {' '.join(where)}"))
        elif isinstance(check, (sc.DiffExcludes, sc.OutputExcludes)):
            said = [p for p in _literals(check) if len(p) >= 4 and p.lower() in task]
            if said:
                leaks.append(Leak("task", "check", f"{sc.check_name(check)} {', '.join(said)}"))
    return leaks


def _literals(check) -> list[str]:
    patterns = check.patterns if isinstance(check, sc.DiffExcludes) else check.output_excludes
    return [p for p in patterns if isinstance(p, str) and not re.search(r"[\\^$*+?()\[\]{}|]", p)]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def _fixture_texts(fixture: Path, task: str) -> list[tuple[str, str]]:
    texts = [(name, body) for name in DOCS if (body := read_fixture_file(fixture, name)) is not None]
    named = [t for t in dict.fromkeys(re.findall(r"[\w.-]+(?:/[\w.-]+)*\.\w+", task)) if t not in DOCS]
    for rel in named[:MAX_NAMED_FILES]:
        body = read_fixture_file(fixture, rel)
        if body is not None:
            comments = "\n".join(m.group(1) for line in body.splitlines() if (m := _COMMENT.match(line)))
            texts.append((f"{rel} (comments)", comments))
    return texts


def read_fixture_file(fixture: Path, rel: str) -> str | None:
    """The first ``MAX_READ`` bytes of ``rel`` in ``fixture`` as text, or None: no link is followed on the way
    (``O_NOFOLLOW`` on every folder and the file), nothing but a regular file is read, no ``..``."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or rel.startswith("/"):
        return None
    fds: list[int] = []
    try:
        fds.append(os.open(fixture, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for part in parts[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
        fds.append(os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fds[-1]))
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            return None
        return os.read(fds[-1], MAX_READ).decode("utf-8", errors="replace")
    except OSError:  # missing, a link (ELOOP), not a folder: nothing to read
        return None
    finally:
        for fd in fds:
            os.close(fd)

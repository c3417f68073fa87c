"""Escalation: the checks that proved an ignored rule, rendered as enforcement.

A rule the agent keeps breaking (``bot.playbook.worth``: ``ignored``) stops being
advice. Its scenario's checks are executable policy:

- each ``not_ran`` check becomes a deny entry of a Claude Code ``PreToolUse``
  hook (``.claude/settings.json`` plus ``.claude/hooks/replaybook-guard.py``):
  a Bash command that would run the matching program (in that working
  directory, with those arguments, or matching ``match``) is refused before it
  runs, and the agent is told why;
- each ``diff_excludes`` check becomes a CI step that fails a pull request
  whose added lines match its patterns (``.github/workflows/replaybook-guard.yml``);
- a rule with neither gets a proposed rewording instead (no mechanical form).

:func:`plan` is the one planner: it reads the repository through a
:class:`~bot.change.Tree` and returns a :class:`~bot.change.Change`, which the
local sink (``playbook escalate --write``) applies and the dashboard's PR
commits, alike. The guard is generated: the scenario is its
source, and every pattern in it passes through ``json.dumps`` (data, never
code) into the script.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from bot.change import Change, Tree
from bot.errors import BadInput
from bot.playbook.rule import Rule
from bot.scenario import spec as sc

HOOK_PATH = ".claude/hooks/replaybook-guard.py"
SETTINGS_PATH = ".claude/settings.json"
POLICY_PATH = ".claude/hooks/replaybook-guard.json"
WORKFLOW_PATH = ".github/workflows/replaybook-guard.yml"


@dataclass
class Escalation:
    rule_id: str
    deny: list[dict] = field(default_factory=list)  # from not_ran
    diff_excludes: list[str] = field(default_factory=list)
    rewording: str | None = None  # when nothing is mechanical

    @property
    def mechanical(self) -> bool:
        return bool(self.deny or self.diff_excludes)


def escalation(rule: Rule, scenario: sc.Scenario) -> Escalation:
    out = Escalation(rule.id)
    for check in scenario.pass_if:
        if isinstance(check, sc.NotRan):
            want = check.not_ran
            out.deny.append({"rule": rule.id, "command": want.command, "cwd": want.cwd, "args": list(want.args or []),
                             "match": want.match})
        elif isinstance(check, sc.DiffExcludes):
            out.diff_excludes += list(check.patterns)
    if not out.mechanical:
        out.rewording = (f"{rule.id} is ignored and its scenario has no `not_ran` or `diff_excludes` check to enforce; "
                         "reword it to name the exact command or file it is about, or change the task's spec.")
    return out


def merge_policy(existing: str | None, esc: Escalation) -> str:
    """The guard's policy file with ``esc``'s entries replacing any earlier ones of the same rule."""
    try:
        data = json.loads(existing) if existing else {}
    except json.JSONDecodeError:
        data = {}
    deny = [d for d in data.get("deny", []) if isinstance(d, dict) and d.get("rule") != esc.rule_id]
    return json.dumps({"deny": deny + esc.deny}, indent=2) + "\n"


def merge_settings(existing: str | None) -> str:
    """``.claude/settings.json`` with the guard's PreToolUse hook on Bash, every other setting kept."""
    try:
        data = json.loads(existing) if existing else {}
    except json.JSONDecodeError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    command = f'python3 "$CLAUDE_PROJECT_DIR/{HOOK_PATH}"'
    hooks = data.setdefault("hooks", {}).setdefault("PreToolUse", [])
    present = [c.get("command") for h in hooks if isinstance(h, dict) for c in h.get("hooks") or [] if isinstance(c, dict)]
    if command not in present:
        hooks.append({"matcher": "Bash", "hooks": [{"type": "command", "command": command, "timeout": 10}]})
    return json.dumps(data, indent=2) + "\n"


def files(rule: Rule, scenario: sc.Scenario, current: dict[str, str | None]) -> dict[str, str]:
    """The files that enforce ``rule`` (relative path -> text), from the ``current`` text of each (None: absent)."""
    esc = escalation(rule, scenario)
    out: dict[str, str] = {}
    if esc.deny:
        out[POLICY_PATH] = merge_policy(current.get(POLICY_PATH), esc)
        out[SETTINGS_PATH] = merge_settings(current.get(SETTINGS_PATH))
        out[HOOK_PATH] = HOOK
    if esc.diff_excludes:
        out[WORKFLOW_PATH] = workflow(esc.diff_excludes, rule.id)
    return out


@dataclass(frozen=True)
class Plan:
    escalation: Escalation
    change: Change  # empty when nothing is mechanical: then ``escalation.rewording`` says what to do


def plan(rule: Rule, root: Path, tree: Tree) -> Plan:
    """Escalating ``rule``: its scenario (under ``root``) read, the current guard files read from ``tree``."""
    scenario = sc.load(Path(root) / rule.replay).scenario
    current = {p: tree.read(p) for p in (SETTINGS_PATH, POLICY_PATH)}
    for path, text in current.items():
        if text is None and (Path(root) / path).exists():  # there, but not UTF-8 text: merging would lose it
            raise BadInput(f"{path}: is not a UTF-8 text file; fix or remove it, then escalate again")
    return Plan(escalation(rule, scenario), Change(files(rule, scenario, current)))


def workflow(patterns: list[str], rule_id: str) -> str:
    """A CI job failing a PR whose added lines match a pattern (patterns reach the script as env, not code)."""
    env = json.dumps(json.dumps(patterns))  # a YAML double-quoted scalar holding the JSON list
    return f"""# Generated by Replaybook from the scenario of {rule_id} (an ignored rule's checks, enforced).
name: Replaybook guard
on: {{pull_request: {{}}}}
permissions: {{}}
jobs:
  diff-excludes:
    runs-on: ubuntu-latest
    permissions: {{contents: read}}
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683  # v4.2.2
        with: {{fetch-depth: 0, persist-credentials: false}}
      - name: Fail when an added line matches a pattern the playbook forbids
        env:
          PATTERNS: {env}
          BASE: ${{{{ github.event.pull_request.base.sha }}}}
        run: |
          git diff --unified=0 "$BASE"...HEAD | python3 -c '
          import json, os, re, sys
          pats = [re.compile(p) for p in json.loads(os.environ["PATTERNS"])]
          bad = [l for l in sys.stdin.read().splitlines() if l.startswith("+") and not l.startswith("+++")
                 and any(p.search(l[1:]) for p in pats)]
          for l in bad: print("::error::added line matches a forbidden pattern: " + l[1:200])
          sys.exit(1 if bad else 0)'
"""


HOOK = r'''#!/usr/bin/env python3
"""Replaybook guard: a Claude Code PreToolUse hook (generated; its policy is replaybook-guard.json).

Refuses a Bash command that would run what an ignored rule's scenario says
must not run. Exit 2 blocks the tool call; stderr tells the agent why.
"""
import json, os, posixpath, re, shlex, sys

PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
WRAPPERS = {"env", "sudo", "exec", "time", "nohup", "command"}


def program(words):
    while words and (words[0] in WRAPPERS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words = words[1:]
    if not words:
        return "", []
    name = posixpath.basename(words[0])
    if PYTHON.match(name) and len(words) >= 3 and words[1] == "-m":
        return words[2], words[3:]
    return name, words[1:]


def segments(command):
    return [s.strip() for s in re.split(r"&&|\|\||;|\||\n", command) if s.strip()]


def denied(command, cwd, rules):
    for seg in segments(command):
        try:
            words = shlex.split(seg)
        except ValueError:
            words = seg.split()
        if words and words[0] == "cd":
            cwd = posixpath.normpath(posixpath.join(cwd, words[1] if len(words) > 1 else "."))
            continue
        name, args = program(words)
        for rule in rules:
            if rule.get("command") and rule["command"] != name:
                continue
            if rule.get("match") and not re.search(rule["match"], shlex.join(words)):
                continue
            if rule.get("cwd") is not None and posixpath.normpath(rule["cwd"]) != cwd:
                continue
            if all(a in args for a in rule.get("args") or []):
                return rule, seg, cwd
    return None


def main():
    try:
        event = json.load(sys.stdin)
    except ValueError:
        return 0
    if event.get("tool_name") != "Bash":
        return 0
    command = (event.get("tool_input") or {}).get("command") or ""
    project = os.environ.get("CLAUDE_PROJECT_DIR") or event.get("cwd") or "."
    here = os.path.relpath(event.get("cwd") or project, project).replace(os.sep, "/")
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "replaybook-guard.json")) as handle:
        rules = json.load(handle).get("deny", [])
    hit = denied(command, posixpath.normpath(here), rules)
    if hit is None:
        return 0
    rule, seg, cwd = hit
    where = "" if rule.get("cwd") is None else " from " + rule["cwd"]
    print(f"Refused by the playbook guard for [{rule['rule']}]: `{seg}` runs {rule.get('command') or 'a forbidden command'}"
          f"{where}, which this project's playbook forbids. Read the rule {rule['rule']} and do it its way.",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
'''

"""Gate material: tiny scenarios the simulated agent passes or fails in tens of milliseconds, a candidate
rule, the playbook it lands in, and the gate run the way the tests run it."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from helpers import incident_yaml, write

from bot.gate import decision as gate_mod
from bot.incident.store import IncidentStore
from bot.playbook.store import Playbook
from bot.replay.engine import ReplayOptions

RULE = "When a task says make it right, write right.txt and never wrong.txt."


def mini_scenario(root: Path, sid: str, branch_on: str = "write right.txt", *, inverse=False, broken=False,
                  hang=False) -> Path:
    """A scenario the agent passes by writing right.txt, and fails by writing wrong.txt."""
    folder = root / "scenarios" / sid
    write(folder / "repo" / "README.md", "fixture\n")
    good = [{"bash": "echo ok > right.txt"}, {"say": "done"}]
    bad = [{"bash": "echo no > wrong.txt"}, {"say": "done"}]
    if hang:
        good = bad = [{"bash": "sleep 30"}, {"say": "done"}]
    with_rule, without_rule = (bad, good) if inverse else (good, bad)
    write(folder / "policy.yaml", yaml.safe_dump({"branch_on": branch_on, "with_rule": with_rule,  # no YAML alias:
                                                  "without_rule": copy.deepcopy(without_rule)}))  # the loader bans them
    checks = [{"succeeds": {"run": "test -f right.txt"}}, {"exists": ["README.md"]}]
    budget = {"max_turns": 5, "timeout_s": 1.5 if hang else 60, "max_cost_usd": 1.0}
    scenario = {"id": sid, "task": "make it right", "repo": "repo", "pass_if": checks, "budget": budget}
    write(folder / "scenario.yaml", yaml.safe_dump(scenario) if not broken else "id: [broken\n")
    return folder


RULE_FILE = "playbook/rules/rule-0001.yaml"


def pr_repo(root: Path, *, own: dict | None = None, victim: bool = False) -> tuple[str, str]:
    """A git repository whose base has the scenarios and incidents, and whose HEAD (a PR) adds rule-0001 to
    ``playbook/rules/``; (base, head). ``own`` shapes the rule's scenario; ``victim`` adds a suite scenario
    the rule's text makes the agent fail."""
    from support.github import git

    write(root / "incidents" / "inc-a.yaml", incident_yaml("inc-a"))
    write(root / "incidents" / "inc-b.yaml", incident_yaml("inc-b", created="2026-07-15T00:00:00Z"))
    mini_scenario(root, "own", **(own or {}))
    if victim:
        mini_scenario(root, "victim", inverse=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD")
    write(root / RULE_FILE, yaml.safe_dump({"id": "rule-0001", "rule": RULE, "cites": ["inc-a", "inc-b"],
                                            "task_types": [], "replay": "scenarios/own", "created": "2026-11-01"}))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the rule PR")
    return base, git(root, "rev-parse", "HEAD")


def candidate(root: Path, rule_id="rule-0001", text=RULE, sid="own", cites=("inc-a", "inc-b")) -> Path:
    return write(root / "playbook" / "proposed" / f"{rule_id}.yaml",
                 yaml.safe_dump({"id": rule_id, "rule": text, "cites": list(cites), "task_types": [],
                                 "replay": f"scenarios/{sid}", "created": "2026-11-01"}))


def setup(root: Path) -> Path:
    write(root / "incidents" / "inc-a.yaml", incident_yaml("inc-a"))
    write(root / "incidents" / "inc-b.yaml", incident_yaml("inc-b", created="2026-07-15T00:00:00Z"))
    mini_scenario(root, "own")
    return candidate(root)


def own_reads(root: Path, rel: str = "web/app.js", sid: str = "own") -> None:
    """The scenario ``sid``'s agent opens ``rel`` first: a candidate path-scoped to its folder reaches builtin (which
    stands for Claude Code) only after that (``bot.replay.agents.scoped_delivery``)."""
    folder = root / "scenarios" / sid
    write(folder / "repo" / rel, "app()\n")
    policy = yaml.safe_load((folder / "policy.yaml").read_text(encoding="utf-8"))
    for side in ("with_rule", "without_rule"):
        policy[side] = [{"read": rel}, *policy[side]]
    write(folder / "policy.yaml", yaml.safe_dump(policy))


def book(root: Path, cap: int = 60) -> Playbook:
    return Playbook(root / "playbook", root=root, cap=cap, incidents=IncidentStore(root / "incidents"))


def gate(root: Path, path: Path, **kw) -> gate_mod.GateResult:
    replay = ReplayOptions(runs_dir=kw.pop("runs_dir", None), noise=kw.pop("noise", 0.0), seed=kw.pop("seed", 0))
    kw.setdefault("suite_trials", 3)  # a small baseline: these suites are deterministic, and replays cost time
    opts = gate_mod.GateOptions(replay=replay, cache_dir=kw.pop("cache_dir", root / ".cache"), **kw)
    return gate_mod.run_gate(book(root, kw.pop("cap", 60)), path, root / "scenarios", opts)


# -- Ctrl-C: a gate that hangs, and the sandbox processes it must not leave behind

SCRIPT = Path(sys.executable).parent / "replaybook"
MARK = "replaybook-sigint-probe"


def hanging_scenario(root: Path) -> None:
    folder = root / "scenarios" / "own"
    write(folder / "repo" / "README.md", "fixture\n")
    slow = [{"bash": f"sleep 60; : {MARK}"}, {"say": "done"}]  # a list: bash stays, its argv shows MARK
    write(folder / "policy.yaml", yaml.safe_dump({"branch_on": "write right.txt", "with_rule": slow,
                                                  "without_rule": copy.deepcopy(slow)}))  # no YAML alias
    write(folder / "scenario.yaml", yaml.safe_dump({
        "id": "own", "task": "make it right", "repo": "repo",
        "pass_if": [{"succeeds": {"run": "test -f right.txt"}}, {"exists": ["README.md"]}],
        "budget": {"max_turns": 5, "timeout_s": 300, "max_cost_usd": 1.0}}))


class Running:
    """``replaybook --root ROOT ARGS`` as a real subprocess, its stdout and stderr read line by line as they come
    (``out``, ``err``); killed on leaving the ``with`` if it still runs."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen([str(SCRIPT), "--root", str(root), *args], cwd=root,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [threading.Thread(target=lambda s=s, d=d: d.extend(iter(s.readline, "")), daemon=True)
                         for s, d in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    @property
    def code(self) -> int | None:
        return self.proc.returncode

    def text(self) -> tuple[str, str]:
        """What it wrote so far: stdout, stderr."""
        return "".join(self.out), "".join(self.err)

    def wait_for(self, text: str, *, on: str = "out", within_s: float = 120) -> None:
        """Until a line of its stdout (``on="err"``: stderr) holds ``text``; it must run all the while."""
        lines = self.out if on == "out" else self.err
        deadline = time.monotonic() + within_s
        while not any(text in line for line in lines):
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < deadline, (f"it never wrote {text!r}", self.text())
            time.sleep(0.1)

    def interrupt(self, within_s: float) -> float:
        """Ctrl-C (SIGINT) to it, still running; the seconds until it exited, waited for ``within_s`` at most."""
        assert self.proc.poll() is None, self.text()
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=within_s)
        took = time.monotonic() - sent
        for reader in self._readers:
            reader.join(timeout=5)
        return took


def wait_for_sleepers(deadline_s: float = 60) -> None:
    """Until a sandboxed ``sleep 60`` is running (so :func:`sleepers` is seen to see it)."""
    deadline = time.monotonic() + deadline_s
    while not sleepers():
        assert time.monotonic() < deadline, "the agent's `sleep 60` never appeared in ps"
        time.sleep(0.1)


def sleepers() -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if MARK in line and "ps -eo" not in line]


# -- redundancy re-tests

def redundancy_playbook(root):
    """Two admitted rules: one the agent still needs, one it has outgrown."""
    write(root / "incidents" / "inc-a.yaml", incident_yaml("inc-a"))
    write(root / "incidents" / "inc-b.yaml", incident_yaml("inc-b", created="2026-07-15T00:00:00Z"))
    mini_scenario(root, "needed")  # without its rule the agent writes wrong.txt
    mini_scenario(root, "outgrown", branch_on="never in any prompt", inverse=True)  # the agent gets it right anyway
    texts = {"needed": "When a task says make it right, write right.txt and never wrong.txt.",
             "outgrown": "When a task says make it right, check the README first."}
    for n, sid in ((1, "needed"), (2, "outgrown")):
        write(root / "playbook" / "rules" / f"rule-000{n}.yaml", yaml.safe_dump({
            "id": f"rule-000{n}", "rule": texts[sid],
            "cites": ["inc-a", "inc-b"], "replay": f"scenarios/{sid}", "created": "2026-08-01"}))

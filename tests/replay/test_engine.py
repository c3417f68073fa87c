"""The replay engine end to end: real sandboxes, the simulated model over HTTP, real agents.

Unless a test says otherwise it uses the ``builtin`` agent (the anthropic SDK
in-process) against the scripted gateway. Tiny scenarios keep it fast; the four
bundled scenarios are replayed both ways.
"""

from __future__ import annotations

import gc
import json
import shlex
import sys
import time
import warnings
from pathlib import Path

import pytest
from helpers import processes_with

from bot.errors import BadInput
from bot.playbook import rule as rule_mod
from bot.replay.engine import (
    TrialResult,
    rescore,
    run_trial,
    run_trials,
    trial_seed,
)
from bot.replay.gateway.policy import load_policy
from bot.replay.trace.events import CommandEvent, read_trace
from bot.scenario import spec as sc

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "scenarios"
PROOF = {"succeeds": {"run": "test -f README.md"}}
RULE_TEXT = "MAGIC RULE: work the careful way."  # the tiny scenarios branch on "MAGIC RULE"





def trace_of(result: TrialResult) -> list:
    assert result.run_dir, "the trial kept no run folder"
    return read_trace(Path(result.run_dir) / "trace.jsonl")


def commands(result: TrialResult) -> list[CommandEvent]:
    return [e for e in trace_of(result) if isinstance(e, CommandEvent)]


def failed_checks(result: TrialResult) -> list[str]:
    return [c.check for c in result.failed_checks]


def alive(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie is dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def gone_within(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


# -- the four bundled scenarios ------------------------------------------------------

WITHOUT_RULE_FAILS = {
    "monorepo-test-cwd": ["ran pytest (cwd packages/api)", "not_ran pytest (cwd .)",
                          "diff_excludes sys.path.insert, sys.path.append"],
    "dynamic-module-delete": ["exists app/exporters/ledger_v1.py, app/exporters/csv_export.py",
                              "unchanged config/exporters.ini",
                              "succeeds python -m app.cli --format ledger --orders data/orders.json"],
    "flaky-network-retry": ["http max_requests 3", "max_runs curl <= 2", "succeeds python -m pytest -q",
                            "succeeds python sync.py"],
    "lint-disable": ["diff_excludes lint: disable, noqa"],
}


def bundled(scenario_id: str) -> tuple[sc.LoadedScenario, str]:
    """The scenario and the text of the rule it proves."""
    folder = BUNDLED / scenario_id
    return sc.load(folder), rule_mod.load(folder / "rule.yaml", named_by_id=False).rule


@pytest.mark.parametrize("scenario_id", sorted(WITHOUT_RULE_FAILS))
def test_bundled_scenario_fails_without_its_rule(scenario_id, opts):
    loaded, _ = bundled(scenario_id)
    result = run_trial(loaded, "", opts(), 0)
    assert result.verdict == "failed", result.reason
    assert failed_checks(result) == WITHOUT_RULE_FAILS[scenario_id]
    assert result.simulated and result.model_calls > 0


@pytest.mark.parametrize("scenario_id", sorted(WITHOUT_RULE_FAILS))
def test_bundled_scenario_passes_with_its_rule(scenario_id, opts):
    loaded, rule_text = bundled(scenario_id)
    result = run_trial(loaded, f"# Playbook\n\n- {rule_text}\n", opts(), 0)
    assert result.verdict == "passed", result.reason
    assert result.agent_status == "finished"
    assert len(result.checks) == len(loaded.scenario.pass_if)


# -- the trace and re-scoring ------------------------------------------------------------


def test_trace_holds_every_kind_of_event_and_the_run_folder_its_files(make_scenario, opts):
    loaded = make_scenario(
        pass_if=[{"ran": {"command": "ls", "cwd": "sub"}}, {"exists": ["notes.txt"]}, PROOF],
        files={"README.md": "hi\n", "sub/a.txt": "a\n"},
        with_rule=[{"bash": "cd sub && ls"}, {"write": {"path": "notes.txt", "content": "noted\n"}},
                   {"say": "Done. [rule-0001]"}])
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert result.verdict == "passed", result.reason
    events = trace_of(result)
    kinds = [e.kind for e in events]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert {"model_call", "tool_call", "command", "file_change", "agent_output"} <= set(kinds)
    assert [e.seq for e in events] == list(range(len(events)))
    calls = [e for e in events if e.kind == "model_call"]
    assert len(calls) == result.model_calls == 3 and all(c.simulated for c in calls)
    assert [(e.name, e.is_error) for e in events if e.kind == "tool_call"] == [("bash", False), ("write", False)]
    assert [(c.argv, c.cwd) for c in commands(result)] == [(["ls"], "sub")]
    assert [(e.path, e.status) for e in events if e.kind == "file_change"] == [("notes.txt", "A")]
    assert events[-1].status == "passed"
    run_dir = Path(result.run_dir)
    assert "+noted" in (run_dir / "diff.patch").read_text()
    assert "toolu_sim_" in (run_dir / "agent.raw").read_text()
    assert json.loads((run_dir / "end_state.json").read_text())["exists"] == {"notes.txt": True}


def test_rescore_decides_the_same_checks_without_running_anything(make_scenario, opts, tmp_path, sandbox_tmp):
    counter = tmp_path / "succeeds-ran"
    loaded = make_scenario(
        pass_if=[{"ran": {"command": "ls"}}, {"not_ran": {"command": "rm"}}, {"diff_excludes": ["TODO"]},
                 {"succeeds": {"run": f"bash -c 'echo ran >> {counter}'"}}, {"succeeds": {"run": "test -f gone"}}],
        with_rule=[{"bash": "ls"}, {"write": {"path": "a.py", "content": "x = 1  # TODO\n"}}, {"say": "ok"}])
    # Unisolated, so the counter outside the sandbox can show whether a check ran again.
    result = run_trial(loaded, RULE_TEXT, opts(runs_dir=tmp_path, sandbox="none"), 0)
    assert result.verdict == "failed"
    assert failed_checks(result) == ["diff_excludes TODO", "succeeds test -f gone"]
    assert counter.read_text() == "ran\n"
    assert list(sandbox_tmp.iterdir()) == []  # the sandbox is gone
    again = rescore(Path(result.run_dir), loaded)
    assert [c.to_dict() for c in again] == [c.to_dict() for c in result.checks]
    assert counter.read_text() == "ran\n"  # the succeeds command did not run again


def test_rescore_of_an_unscored_run_is_bad_input(make_scenario, opts):
    loaded = make_scenario(pass_if=[PROOF], with_rule=[{"bash": "ls"}] * 3, budget={"max_cost_usd": 1e-9})
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert result.verdict == "unscored"
    with pytest.raises(BadInput, match="no end_state.json"):
        rescore(Path(result.run_dir), loaded)


# -- the command agent --------------------------------------------------------------------

SDK_AGENT = '''
import os, subprocess, sys
import anthropic

task, playbook = sys.argv[1], open(sys.argv[2]).read()
client = anthropic.Anthropic(base_url=os.environ["ANTHROPIC_BASE_URL"], api_key=os.environ["ANTHROPIC_API_KEY"])
tools = [{"name": "bash", "description": "run a command",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
messages = [{"role": "user", "content": task}]
for _ in range(10):
    reply = client.messages.create(model="simulated", max_tokens=1000, system=playbook or "none",
                                   messages=messages, tools=tools)
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
    uses = [b for b in reply.content if b.type == "tool_use"]
    if not uses:
        print(reply.content[-1].text)
        break
    results = []
    for use in uses:
        done = subprocess.run(["bash", "-c", use.input["command"]], capture_output=True, text=True)
        results.append({"type": "tool_result", "tool_use_id": use.id, "content": done.stdout + done.stderr})
    messages.append({"role": "user", "content": results})
'''


def test_command_agent_loops_over_the_gateway_with_the_sdk(make_scenario, opts, tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text(SDK_AGENT)
    loaded = make_scenario(
        pass_if=[{"ran": {"command": "touch", "cwd": "."}}, {"succeeds": {"run": "test -f careful.txt"}}],
        with_rule=[{"bash": "touch careful.txt"}, {"say": "careful"}],
        without_rule=[{"bash": "touch sloppy.txt"}, {"say": "sloppy"}])
    template = f"{shlex.quote(sys.executable)} {shlex.quote(str(agent))} {{task}} {{playbook_file}}"
    passed = run_trial(loaded, RULE_TEXT, opts(agent="command", command=template), 0)
    assert passed.verdict == "passed", passed.reason
    assert passed.model_calls == 2 and passed.agent_status == "finished"
    # The agent's `bash -c` is the shell of its tool call (a ShellEvent), not a command of its own.
    assert [(c.argv, c.cwd, c.depth) for c in commands(passed)] == [(["touch", "careful.txt"], ".", 0)]
    failed = run_trial(loaded, "", opts(agent="command", command=template), 0)
    assert failed.verdict == "failed"
    assert failed_checks(failed) == ["succeeds test -f careful.txt"]


def test_command_agent_script_commands_are_recorded_and_checked(make_scenario, opts, tmp_path):
    script = tmp_path / "agent.sh"
    script.write_text('mkdir -p out\ncd out && ls .. > listing.txt\nprintf "%s" "$1" > ../task.txt\nexit 3\n')
    loaded = make_scenario(
        pass_if=[{"ran": {"command": "ls", "cwd": "out", "args": [".."]}}, {"not_ran": {"command": "rm"}},
                 {"exists": ["out/listing.txt"]}, {"succeeds": {"run": "grep -qx 'Do the tiny task.' task.txt"}}])
    result = run_trial(loaded, "", opts(agent="command", command=f"bash {script} {{task}}"), 0)
    assert result.verdict == "passed", result.reason
    assert result.agent_status == "finished" and result.model_calls == 0
    assert [(c.argv[0], c.cwd) for c in commands(result)] == [("mkdir", "."), ("ls", "out")]


def test_command_agent_that_cannot_start_is_unscored(make_scenario, opts, tmp_path):
    loaded = make_scenario(pass_if=[PROOF])
    missing = tmp_path / "no-such-agent"
    result = run_trial(loaded, "", opts(agent="command", command=f"{missing} {{task}}"), 0)
    assert (result.verdict, result.agent_status) == ("unscored", "crashed")
    assert result.checks == []
    assert trace_of(result)[-1].status == "unscored"


# -- the Claude Code CLI ------------------------------------------------------------------------


@pytest.mark.parametrize("with_rule", [False, True], ids=["without-rule", "with-rule"])
def test_claude_code_replays_a_bundled_scenario(with_rule, claude_code_agent, opts):
    loaded, rule_text = bundled("monorepo-test-cwd")
    result = run_trial(loaded, rule_text if with_rule else "", opts(agent="claude-code"), 0)
    assert result.verdict == ("passed" if with_rule else "failed"), result.reason
    if not with_rule:
        assert failed_checks(result) == WITHOUT_RULE_FAILS["monorepo-test-cwd"]
    events = trace_of(result)
    assert events[0].agent == "claude-code"
    tools = [e.name for e in events if e.kind == "tool_call"]
    assert tools.count("Write") == (1 if with_rule else 2) and "Bash" in tools
    pytest_runs = {(c.depth, c.cwd) for c in commands(result) if c.argv[:3] == ["python", "-m", "pytest"]}
    assert pytest_runs == {(0, "packages/api" if with_rule else ".")}
    assert result.model_calls >= 5 and all(e.simulated for e in events if e.kind == "model_call")


# -- secrets ---------------------------------------------------------------------------------------

SECRETS = {"ANTHROPIC_API_KEY": "sk-ant-real-0123456789", "GITHUB_TOKEN": "ghp_real0123456789",
           "OPENAI_API_KEY": "sk-openai-real-0123456789"}


@pytest.mark.parametrize("agent", ["builtin", "claude-code"])
def test_no_secret_reaches_the_agents_commands(agent, make_scenario, opts, tmp_path, monkeypatch, request):
    if agent == "claude-code":
        request.getfixturevalue("claude_code_agent")
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    loaded = make_scenario(
        pass_if=[{"succeeds": {"run": "test -s env.txt"}}],
        with_rule=[{"bash": "env > env.txt"}, {"bash": 'echo "KEY=$GITHUB_TOKEN" >> env.txt'}, {"say": "done"}])
    result = run_trial(loaded, RULE_TEXT, opts(agent=agent), 0)
    assert result.verdict == "passed", result.reason
    patch = (Path(result.run_dir) / "diff.patch").read_text()
    assert "+HOME=" in patch and "+KEY=\n" in patch  # the dump happened; the token was empty
    assert "***" not in patch  # nothing the redactor knows reached the dump
    for line in patch.splitlines():  # at most the gateway's per-run token (no secret: only it honours it), never a key
        name, _, value = line[1:].partition("=")
        assert name not in SECRETS or value.startswith("rb-gw-"), line
    for path in Path(result.run_dir).iterdir():  # nor the run folder
        text = path.read_text(errors="replace")
        assert not [v for v in SECRETS.values() if v in text], path.name


# -- hangs, loops and destruction ------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["builtin", "command"])
def test_a_hang_times_out_unscored_and_leaves_no_process(agent, make_scenario, opts, tmp_path, sandbox_tmp):
    marker = f"{time.time_ns() % 10**6 + 60}.5"  # a sleep length no other process has: how we find it on the host
    hang = f"bash -c 'exec sleep {marker}'"
    loaded = make_scenario(pass_if=[PROOF], with_rule=[{"bash": hang}, {"say": "done"}], budget={"timeout_s": 2})
    script = tmp_path / "hang.sh"
    script.write_text(f"(sleep {marker} &) ; {hang}\n")
    started = time.monotonic()
    result = run_trial(loaded, RULE_TEXT, opts(agent=agent, command=f"bash {script} {{task}}"), 0)
    assert time.monotonic() - started < 50  # ended at its 2 s budget, not after the 60 s sleeps
    assert (result.verdict, result.agent_status) == ("unscored", "timeout")
    assert result.checks == []
    assert not processes_with(f"sleep {marker}"), "a sleep outlived the trial"
    assert list(sandbox_tmp.iterdir()) == []


def test_scenario_env_and_env_allow_reach_the_agents_commands(make_scenario, opts, monkeypatch):
    monkeypatch.setenv("PASSED_THROUGH", "from-the-user")
    monkeypatch.setenv("NOT_ALLOWED", "hidden")
    loaded = make_scenario(
        pass_if=[{"succeeds": {"run": "grep -qx 'fixed from-the-user -' seen.txt"}}],
        with_rule=[{"bash": 'echo "$FIXED $PASSED_THROUGH ${NOT_ALLOWED:--}" > seen.txt'}, {"say": "done"}],
        env={"FIXED": "fixed"}, env_allow=["PASSED_THROUGH"])
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert result.verdict == "passed", result.checks


def test_a_looping_agent_uses_every_turn_and_is_scored(make_scenario, opts):
    loaded = make_scenario(pass_if=[{"max_runs": {"command": "ls", "max": 2}}, {"succeeds": {"run": "test -f done"}}],
                           with_rule=[{"bash": "ls", "repeat": 1000}], budget={"max_turns": 4})
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert (result.verdict, result.agent_status) == ("failed", "max_turns")
    assert failed_checks(result) == ["max_runs ls <= 2", "succeeds test -f done"]
    assert result.model_calls == 4 and len(commands(result)) == 4


def test_an_agent_that_deletes_git_still_gets_a_verdict(make_scenario, opts, sandbox_tmp):
    loaded = make_scenario(pass_if=[{"exists": ["new.txt"]}, {"unchanged": ["README.md"]},
                                    {"diff_excludes": ["forbidden"]}, {"succeeds": {"run": "test -f new.txt"}}],
                           with_rule=[{"bash": "rm -rf .git && echo hello > new.txt"}, {"say": "done"}])
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert result.verdict == "passed", result.reason
    assert [(e.path, e.status) for e in trace_of(result) if e.kind == "file_change"] == [("new.txt", "A")]
    assert list(sandbox_tmp.iterdir()) == []


def test_an_agent_that_deletes_its_whole_repo_still_gets_a_verdict(make_scenario, opts, sandbox_tmp):
    loaded = make_scenario(pass_if=[{"unchanged": ["README.md"]}, PROOF],
                           files={"README.md": "hi\n", "src/a.py": "a = 1\n"},
                           with_rule=[{"bash": 'rm -rf "$PWD"'}, {"bash": "ls"}, {"say": "done"}])
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert (result.verdict, result.agent_status) == ("failed", "finished")
    assert failed_checks(result) == ["unchanged README.md", "succeeds test -f README.md"]
    events = trace_of(result)
    assert sorted((e.path, e.status) for e in events if e.kind == "file_change") == [
        ("README.md", "D"), ("src/a.py", "D")]
    # Isolated, the root is a mount point: it survives `rm -rf` as an empty folder, so `ls` works.
    assert [e.is_error for e in events if e.kind == "tool_call"] == [False, False]
    assert list(sandbox_tmp.iterdir()) == []


# -- unscored trials -----------------------------------------------------------------------------


def test_a_spent_budget_is_unscored(make_scenario, opts):
    # The builtin agent asks for 4,096 tokens a call: the budget pays for the first calls, not for 50.
    loaded = make_scenario(pass_if=[PROOF], with_rule=[{"bash": "ls", "repeat": 50}], budget={"max_cost_usd": 0.03})
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert (result.verdict, result.agent_status) == ("unscored", "budget")
    assert result.model_calls >= 1 and 0 < result.cost_usd <= 0.03
    assert "budget" in result.reason and result.checks == []


class ExplodingAgent:
    """An in-process agent with a bug: it raises instead of answering (the Agent interface, nothing patched)."""

    name, version = "exploding", "1"

    def run(self, job):
        raise ValueError("a bug inside the agent")


def test_an_in_process_agent_crash_is_unscored_never_failed(make_scenario, opts):
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "false"}}])
    result = run_trial(loaded, RULE_TEXT, opts(), 0, agent=ExplodingAgent())
    assert (result.verdict, result.agent_status) == ("unscored", "crashed")
    assert "ValueError: a bug inside the agent" in result.reason and result.checks == []


def test_a_tool_error_goes_back_to_the_model_and_the_trial_is_scored(make_scenario, opts):
    loaded = make_scenario(pass_if=[PROOF],
                           with_rule=[{"write": {"path": "README.md/child.txt", "content": "x"}},
                                      {"write": {"path": "../outside.txt", "content": "x"}},
                                      {"write": {"path": "bad\0name", "content": "x"}}, {"say": "gave up"}])
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert (result.verdict, result.agent_status) == ("passed", "finished"), result.reason
    calls = [e for e in trace_of(result) if e.kind == "tool_call"]
    assert [e.is_error for e in calls] == [True, True, True]
    assert "NUL byte" in calls[-1].output_excerpt


# -- bad fixtures -------------------------------------------------------------------------------


def test_a_fixture_symlink_out_of_the_fixture_is_bad_input(make_scenario, opts, tmp_path):
    (tmp_path / "secret.txt").write_text("secret")
    loaded = make_scenario(pass_if=[PROOF])
    (loaded.fixture / "escape").symlink_to(tmp_path / "secret.txt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run_trial(loaded, "", opts(), 0)
        except BadInput as exc:
            message = str(exc)
        else:
            pytest.fail("a link out of the fixture was accepted")
        gc.collect()
    assert str(loaded.fixture) in message and "escape ->" in message
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert not [m for m in leaks if "trace.jsonl" in m]  # the trace file was closed


def test_a_missing_fixture_folder_is_bad_input_naming_it(make_scenario, tmp_path):
    with pytest.raises(BadInput) as err:
        make_scenario(pass_if=[PROOF], repo="nothere")
    assert str(tmp_path / "scenarios" / "tiny" / "nothere") in str(err.value)


def test_a_fixture_outside_the_scenarios_folder_is_bad_input(make_scenario, tmp_path):
    with pytest.raises(BadInput, match=r"points outside") as err:
        make_scenario(pass_if=[PROOF], repo="../../elsewhere")
    assert "scenario.yaml" in str(err.value)


# -- several trials --------------------------------------------------------------------------------


@pytest.fixture
def two_way(make_scenario) -> sc.LoadedScenario:
    """Passes on the with_rule branch, fails on the other."""
    return make_scenario(pass_if=[{"succeeds": {"run": "test -f careful.txt"}}],
                         with_rule=[{"bash": "touch careful.txt"}, {"say": "careful"}],
                         without_rule=[{"bash": "touch sloppy.txt"}, {"say": "sloppy"}])


def test_trials_run_in_parallel_and_come_back_in_trial_order(two_way, opts):
    seen = []
    results = run_trials(two_way, RULE_TEXT, opts(), trials=4, jobs=2, progress=seen.append)
    assert [r.trial for r in results] == [0, 1, 2, 3]
    assert sorted(r.trial for r in seen) == [0, 1, 2, 3]
    assert [r.verdict for r in results] == ["passed"] * 4
    assert len({r.run_dir for r in results}) == 4


def test_full_noise_flips_the_branch(two_way, opts):
    results = run_trials(two_way, RULE_TEXT, opts(noise=1.0), trials=2, jobs=2)
    assert [r.verdict for r in results] == ["failed", "failed"]
    flipped = run_trials(two_way, "", opts(noise=1.0), trials=1)
    assert flipped[0].verdict == "passed"


def test_noise_is_reproducible_per_seed(two_way, opts):
    seed = next(s for s in range(100) if 0 < sum(_flips(two_way, s)) < 4)  # a seed that flips some trials
    expected = ["failed" if flip else "passed" for flip in _flips(two_way, seed)]
    first = run_trials(two_way, RULE_TEXT, opts(noise=0.5, seed=seed), trials=4, jobs=2)
    again = run_trials(two_way, RULE_TEXT, opts(noise=0.5, seed=seed), trials=4, jobs=2)
    assert [r.verdict for r in first] == [r.verdict for r in again] == expected


def _flips(loaded: sc.LoadedScenario, seed: int) -> list[bool]:
    policy = loaded.folder / "policy.yaml"
    return [load_policy(policy, noise=0.5, seed=trial_seed(seed, loaded.scenario.id, t, RULE_TEXT)).flipped
            for t in range(4)]


def test_no_runs_dir_keeps_nothing(two_way, opts):
    result = run_trial(two_way, RULE_TEXT, opts(runs_dir=None), 0)
    assert result.verdict == "passed" and result.run_dir is None


def test_with_no_runs_dir_the_run_folder_lives_beside_the_sandboxes_owned_and_goes(two_way, opts, sandbox_tmp):
    """In memory where the sandboxes are (not on a disk: file churn there is the file system's CPU), with an
    owner, so a harness killed mid-trial leaves nothing a later one keeps."""
    seen = []

    def look(phase: str) -> None:
        if phase == "agent":
            seen.extend(p for p in sandbox_tmp.iterdir() if p.name.startswith("replaybook-run-"))
            assert all((p / "trace.jsonl").is_file() and (p / ".owner").is_file() for p in seen)

    result = run_trial(two_way, RULE_TEXT, opts(runs_dir=None), 0, on_phase=look)
    assert result.verdict == "passed" and len(seen) == 1
    assert not seen[0].exists() and list(sandbox_tmp.iterdir()) == []


@pytest.mark.parametrize("kept", [True, False])
def test_the_pristine_copy_is_made_only_for_an_unchanged_check(make_scenario, opts, sandbox_tmp, kept):
    """``unchanged`` alone reads it: without one no copy is made, and with one the check still sees the change."""
    checks = [PROOF, *([{"unchanged": ["README.md"]}] if kept else [])]
    loaded = make_scenario(pass_if=checks, with_rule=[{"bash": "echo changed >> README.md"}, {"say": "done"}])
    copies = []

    def look(phase: str) -> None:
        if phase == "sandbox setup":
            copies.extend(p / "fixture" for p in sandbox_tmp.glob("replaybook-*") if (p / "fixture").is_dir())

    result = run_trial(loaded, RULE_TEXT, opts(), 0, on_phase=look)
    assert len(copies) == (1 if kept else 0)
    assert failed_checks(result) == (["unchanged README.md"] if kept else [])


def test_bad_input_mid_trial_leaves_no_run_folder(make_scenario, opts, tmp_path):
    loaded = make_scenario(pass_if=[PROOF])
    (loaded.folder / "policy.yaml").unlink()  # the simulated model has nothing to play: bad input, found mid-trial
    with pytest.raises(BadInput, match="policy.yaml"):
        run_trial(loaded, RULE_TEXT, opts(), 0)
    assert list((tmp_path / "runs").iterdir()) == []


def test_run_trial_reports_its_phases_in_order(make_scenario, opts):
    from bot.replay.engine import PHASES

    seen: list[str] = []
    result = run_trial(make_scenario(pass_if=[PROOF]), RULE_TEXT, opts(), 0, on_phase=seen.append)
    assert result.verdict in ("passed", "failed")
    assert seen == list(PHASES)  # the stop phases too, as each context closes

"""Attacks on the replay sandbox, through the real engine and the real agents.

The harness holds real-looking secrets in its environment; an agent (the
builtin loop, the real Claude Code CLI, or a command) tries every route to
them, writes outside its sandbox, reaches for the host's loopback, tampers
with the harness's own records, leaves processes behind and floods the disk,
the process table and its output. None of it may work, and no run folder or
output may hold a secret.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from helpers import processes_with

from bot._util.credentials import REDACTED
from bot.replay.engine import ReplayOptions, TrialResult, run_trial
from bot.replay.sandbox import isolation

RULE_TEXT = "MAGIC RULE: work the careful way."
SECRETS = {"ANTHROPIC_API_KEY": "sk-ant-real-abcdef0123456789", "GITHUB_TOKEN": "ghp_realtoken0123456789abcdef"}
AGENTS = ["builtin", "claude-code", "command"]

# Every route to the harness's environment we know, each ending in a file the diff keeps.
STEAL_ENV = [
    # the file is opened first, so it records the refusal: the parent is the executor, which is not dumpable
    "{ tr '\\0' '\\n' < /proc/$PPID/environ; } > via-ppid.txt 2>&1",
    'p=$$; while [ "$p" -gt 0 ]; do tr "\\0" "\\n" < /proc/$p/environ; p=$(cut -d" " -f4 /proc/$p/stat); done > via-walk.txt',
    "for f in /proc/*/environ; do tr '\\0' '\\n' < $f; done > via-scan.txt 2>&1",
    # shell builtins and redirections only: no command record, no process to see
    "for f in /proc/[0-9]*/environ; do while IFS= read -r -d '' l; do echo \"$l\"; done < \"$f\"; done > via-builtins.txt",
    "env > via-env.txt",
]
CONFTEST = (
    "import glob, os\n"
    "dump = [f'{k}={v}' for k, v in os.environ.items()]\n"
    "for f in glob.glob('/proc/*/environ'):\n"
    "    try: dump += open(f, 'rb').read().decode(errors='replace').split('\\0')\n"
    "    except OSError: pass\n"
    "print('\\n'.join(dump))\n"
    "open('conftest-dump.txt', 'w').write('\\n'.join(dump))\n"
)




@pytest.fixture
def agent_opts(request, opts, tmp_path):
    """``agent_opts(name, steps)``: options that make agent ``name`` run the bash ``steps``."""

    def make(name: str, steps: list[str], **kw) -> ReplayOptions:
        if name == "claude-code":
            request.getfixturevalue("claude_code_agent")
        if name == "command":
            script = tmp_path / "agent.sh"
            script.write_text("\n".join(steps) + "\n")
            return opts(agent="command", command=f"bash {script} {{task}}", **kw)
        return opts(agent=name, **kw)

    return make


def bash_steps(steps: list[str]) -> list[dict]:
    return [*({"bash": s} for s in steps), {"say": "done"}]


def artefacts(result: TrialResult) -> str:
    """Everything the run folder holds, and the result as it is printed."""
    parts = [json.dumps(result.to_dict())]
    for path in Path(result.run_dir).rglob("*"):
        if path.is_file():
            parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


def plant_secrets(monkeypatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)



# -- secrets ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_no_route_leads_to_the_harness_environment(agent, make_scenario, agent_opts, monkeypatch):
    plant_secrets(monkeypatch)
    conftest = base64.b64encode(CONFTEST.encode()).decode()
    steps = [*STEAL_ENV, f"echo {conftest} | base64 -d > conftest.py", "mkdir -p tests",
             "printf 'def test_ok():\\n    pass\\n' > tests/test_ok.py"]
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "python -m pytest -q -s"}}],
                           with_rule=bash_steps(steps), requirements=["pytest==8.3.4"])
    result = run_trial(loaded, RULE_TEXT, agent_opts(agent, steps), 0)
    assert result.verdict == "passed", result.reason
    seen = artefacts(result)
    patch = (Path(result.run_dir) / "diff.patch").read_text()
    for name in ("via-ppid", "via-walk", "via-scan", "via-builtins", "via-env"):
        assert f"b/{name}.txt" in patch, f"{name}: the attack did not run"
    assert "Binary files" not in patch  # every dump is text the checks below can read
    assert "+HOME=" in patch  # the dumps did dump something: the sandbox's own environment
    end_state = (Path(result.run_dir) / "end_state.json").read_text()
    assert "HOME=" in end_state  # the conftest ran during `succeeds` and dumped what it could see
    for value in SECRETS.values():
        assert value not in seen
    # The sandbox stopped them, not the redactor: nothing had to be redacted.
    assert REDACTED not in patch


def test_unisolated_the_redactor_still_keeps_secrets_out_of_the_run(make_scenario, opts, monkeypatch, tmp_path):
    plant_secrets(monkeypatch)
    # Without a sandbox the host's files are open: a credential file is one `cat` away.
    creds = tmp_path / "credentials"
    creds.write_text(f"token={SECRETS['GITHUB_TOKEN']}\n")
    steps = [f"cat {creds} > found.txt"]
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "test -s found.txt"}}], with_rule=bash_steps(steps))
    result = run_trial(loaded, RULE_TEXT, opts(sandbox="none"), 0)
    assert result.verdict == "passed", result.reason
    seen = artefacts(result)
    for value in SECRETS.values():
        assert value not in seen
    assert f"+token={REDACTED}" in (Path(result.run_dir) / "diff.patch").read_text()
    assert isolation.NONE_WARNING in result.warnings and result.sandbox == "none"


def test_env_allow_refuses_credentials(make_scenario, opts):
    from bot.errors import BadInput

    for name in ("GITHUB_TOKEN", "ANTHROPIC_API_KEY", "DEPLOY_KEY", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY"):
        with pytest.raises(BadInput) as caught:
            make_scenario(pass_if=[{"succeeds": {"run": "true"}}], env_allow=[name])
        assert f"`{name}` names a credential" in caught.value.render()
    with pytest.raises(BadInput, match="--env-allow: `NPM_TOKEN` names a credential"):
        run_trial(make_scenario(pass_if=[{"succeeds": {"run": "true"}}]), "", opts(env_allow=("NPM_TOKEN",)), 0)


def test_the_gateway_token_dies_with_the_run(make_scenario, agent_opts):
    steps = ['echo "$ANTHROPIC_BASE_URL $ANTHROPIC_API_KEY" > gateway.txt']
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "test -s gateway.txt"}}], with_rule=bash_steps(steps))
    result = run_trial(loaded, RULE_TEXT, agent_opts("command", steps), 0)
    assert result.verdict == "passed", result.reason
    line = next(l for l in (Path(result.run_dir) / "diff.patch").read_text().splitlines() if l.startswith("+http"))
    url, token = line[1:].split()
    assert token.startswith("rb-gw-")
    port = int(url.rsplit(":", 1)[1])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


# -- the host ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_writes_outside_the_sandbox_fail_and_the_host_is_unchanged(agent, make_scenario, agent_opts, tmp_path):
    home_rc = Path(os.path.expanduser("~")) / ".bashrc"
    checkout = Path(__file__).resolve().parents[2]
    before = home_rc.read_bytes() if home_rc.exists() else None
    host_tmp = tmp_path / "host-file.txt"
    targets = [home_rc, host_tmp, checkout / "pwned.txt", checkout / "README.md"]
    steps = [f"{{ echo pwned >> {t}; }} 2>> errors.txt" for t in targets] + ["echo done > done.txt"]
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "test -f done.txt"}}], with_rule=bash_steps(steps))
    readme = (checkout / "README.md").read_bytes()
    result = run_trial(loaded, RULE_TEXT, agent_opts(agent, steps), 0)
    assert result.verdict == "passed", result.reason
    assert (home_rc.read_bytes() if home_rc.exists() else None) == before
    assert not host_tmp.exists() and not (checkout / "pwned.txt").exists()
    assert (checkout / "README.md").read_bytes() == readme
    errors = [l for l in (Path(result.run_dir) / "diff.patch").read_text().splitlines() if l.startswith("+")
              and ("Read-only file system" in l or "No such file or directory" in l)]
    assert len(errors) == len(targets), errors  # each write was refused (a masked folder does not even exist)


@pytest.mark.parametrize("agent", ["builtin", "command"])
def test_the_hosts_loopback_is_out_of_reach(agent, make_scenario, agent_opts):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        server.settimeout(10)
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    steps = [f"(echo hello > /dev/tcp/127.0.0.1/{port}) 2> reach.txt; echo rc=$? >> reach.txt"]
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "grep -q rc=1 reach.txt"}}], with_rule=bash_steps(steps))
    result = run_trial(loaded, RULE_TEXT, agent_opts(agent, steps), 0)
    server.close()
    thread.join(timeout=12)
    assert result.verdict == "passed", (Path(result.run_dir) / "diff.patch").read_text()
    assert accepted == []


# -- the harness's own records ----------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["builtin", "command"])
def test_tampering_with_the_command_log_and_the_pristine_copy_changes_no_verdict(agent, make_scenario, agent_opts):
    steps = ["touch forbidden.txt", "echo changed > README.md",
             ": > /run/replaybook/commands; : > \"$REPLAYBOOK_SHIM_LOG\"; unset REPLAYBOOK_SHIM_LOG",
             "cp README.md \"$HOME/../fixture/README.md\"; cat /run/replaybook/commands > stolen.txt"]
    loaded = make_scenario(pass_if=[{"not_ran": {"command": "touch"}}, {"unchanged": ["README.md"]},
                                    {"succeeds": {"run": "true"}}],
                           files={"README.md": "original\n"}, with_rule=bash_steps(steps))
    result = run_trial(loaded, RULE_TEXT, agent_opts(agent, steps), 0)
    assert result.verdict == "failed"
    assert sorted(c.check for c in result.failed_checks) == ["not_ran touch", "unchanged README.md"]


@pytest.mark.parametrize("agent", AGENTS)
def test_nothing_the_agent_starts_outlives_the_run(agent, make_scenario, agent_opts):
    marker = f"{time.time_ns() % 10**6 + 1000}.25"
    steps = [f"setsid sleep {marker} > /dev/null 2>&1 < /dev/null &",
             f"( ( nohup sleep {marker} > /dev/null 2>&1 & ) & )", "echo started > started.txt"]
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "test -f started.txt"}}], with_rule=bash_steps(steps))
    result = run_trial(loaded, RULE_TEXT, agent_opts(agent, steps), 0)
    assert result.verdict == "passed", result.reason
    assert processes_with(f"sleep {marker}") == []


# -- bounds -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attack, budget, reason", [
    ("for i in $(seq 200); do sleep 3001.5 & done; wait", {"max_processes": 64}, "process limit"),
    ("head -c 2G /dev/zero > big.bin", {"max_disk_mb": 64}, "disk limit"),
    ("head -c 500M /dev/zero | tr '\\0' x", {"max_output_mb": 16}, "output limit"),
], ids=["200-sleeps", "2GB-file", "500MB-stdout"])
def test_bounds_end_the_trial_unscored_and_clean_up(attack, budget, reason, make_scenario, opts, sandbox_tmp):
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "true"}}], with_rule=bash_steps([attack]),
                           budget={"timeout_s": 60, **budget})
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert (result.verdict, result.agent_status) == ("unscored", "limit")
    assert reason in result.reason
    # the bound, not the 60 s timeout, ended it: agent_status is "limit", not "timeout" (no wall-clock bound here)
    run_bytes = sum(p.stat().st_size for p in Path(result.run_dir).rglob("*") if p.is_file())
    assert run_bytes < 2 << 20  # the run folder holds no copy of the flood
    assert list(sandbox_tmp.iterdir()) == []
    assert processes_with("sleep 3001.5") == []  # a duration nothing else on the host sleeps for


def test_a_conftest_that_breaks_a_bound_during_the_checks_leaves_the_trial_unscored(make_scenario, opts):
    steps = ["printf 'import os\\nos.system(\"head -c 2G /dev/zero > big.bin\")\\n' > conftest.py"]
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "python -m pytest -q"}}], with_rule=bash_steps(steps),
                           requirements=["pytest==8.3.4"], budget={"max_disk_mb": 32})
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert (result.verdict, result.agent_status) == ("unscored", "limit")
    assert "disk limit" in result.reason


# -- toolchains and setup -----------------------------------------------------------------------------------


def test_a_declared_toolchain_leads_the_path_whatever_the_host_holds(make_scenario, opts, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a stock PATH: no pytest, maybe no `python` at all
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "python -m pytest --version"}},
                                    {"succeeds": {"run": "grep -q /envs/ which.txt"}}],
                           with_rule=bash_steps(["python -c 'import sys; print(sys.prefix)' > which.txt"]),
                           requirements=["pytest==8.3.4"])
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert result.verdict == "passed", result.reason
    assert result.warnings == []


def test_a_scenario_without_requirements_is_warned_that_its_verdict_depends_on_the_host(make_scenario, opts):
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "true"}}])
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert any("depends on the host" in w for w in result.warnings)


def test_setup_gives_the_agent_history_and_the_baseline_sits_on_top(make_scenario, opts):
    setup = ["git init -q -b main", "git add -A",
             "git -c user.name=x -c user.email=x@x commit -q -m 'first commit of the fixture'",
             "bash -c 'echo built > artefact.txt'"]
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "grep -q 'first commit of the fixture' log.txt"}},
                                    {"unchanged": ["artefact.txt"]}],
                           with_rule=bash_steps(["git log --format=%s > log.txt"]), setup=setup)
    result = run_trial(loaded, RULE_TEXT, opts(), 0)
    assert result.verdict == "passed", result.reason
    changed = [json.loads(l)["path"] for l in (Path(result.run_dir) / "trace.jsonl").read_text().splitlines()
               if json.loads(l)["kind"] == "file_change"]
    assert changed == ["log.txt"]  # setup's artefact and history are part of the baseline


def test_a_failing_setup_command_is_bad_input(make_scenario, opts):
    from bot.errors import BadInput

    loaded = make_scenario(pass_if=[{"succeeds": {"run": "true"}}], setup=["false"])
    with pytest.raises(BadInput, match="setup command `false` failed"):
        run_trial(loaded, RULE_TEXT, opts(), 0)


def test_requirements_that_could_run_code_on_the_host_are_refused(make_scenario):
    from bot.errors import BadInput

    for bad in ("evil @ https://example.com/evil.whl", "./local-package", "-e .", "--index-url http://x"):
        with pytest.raises(BadInput) as caught:
            make_scenario(pass_if=[{"succeeds": {"run": "true"}}], requirements=[bad])
        assert "requirements" in caught.value.render()


def test_a_command_agent_that_dies_before_its_first_model_call_is_unscored(make_scenario, opts, tmp_path):
    script = tmp_path / "broken-agent.sh"
    script.write_text("echo 'ImportError: no module named agent' >&2\nexit 1\n")
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "true"}}])  # it would pass: the verdict must not stand
    result = run_trial(loaded, "", opts(agent="command", command=f"bash {script} {{task}}"), 0)
    assert (result.verdict, result.agent_status) == ("unscored", "crashed")
    assert "before its first model call" in result.reason and "ImportError" in result.reason


def test_old_run_folders_are_pruned_by_count_and_age(tmp_path):
    from bot.replay.engine import prune_runs

    runs = tmp_path / "runs"
    now = time.time()
    for i in range(6):
        folder = runs / f"run-{i}"
        folder.mkdir(parents=True)
        (folder / "trace.jsonl").write_text("{}\n")
        age = 3600 * (i + 1) if i < 5 else 86400 * 40  # the last one is 40 days old
        os.utime(folder, (now - age, now - age))
    (runs / "fresh").mkdir()
    (runs / "fresh" / "trace.jsonl").write_text("{}\n")  # a run still being written: never pruned
    (runs / "not-a-run").mkdir()
    gone = prune_runs(runs, keep=3, max_age_days=30)
    assert sorted(p.name for p in gone) == ["run-2", "run-3", "run-4", "run-5"]
    assert sorted(p.name for p in runs.iterdir()) == ["fresh", "not-a-run", "run-0", "run-1"]

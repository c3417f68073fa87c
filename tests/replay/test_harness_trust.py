"""The harness trusts nothing the scenario, the fixture, `setup:`, a toolchain or the agent controls.

Each test is an attack from docs/security.md, run through the real engine (and,
in tests/cli/test_harness_trust_cli.py, through `replaybook replay` and `gate`).
Fake secrets are planted in the harness's own environment; a marker file
outside the sandbox shows whether scenario code ran on the host.
"""

from __future__ import annotations

import os
import site
import stat
import sys
import time
from pathlib import Path

import pytest

from bot.errors import BadInput
from bot.replay.engine import run_trial
from bot.replay.sandbox import isolation
from bot.replay.sandbox.stale import remove_stale
from bot.replay.sandbox.toolchain import Toolchain
from bot.replay.sandbox.workspace import Sandbox

RULE = "MAGIC RULE: work the careful way."
PROOF = {"succeeds": {"run": "test -f README.md"}}
SECRETS = {"GITHUB_TOKEN": "ghp_planted0123456789abcdef", "ANTHROPIC_API_KEY": "sk-ant-planted-0123456789",
           "REPLAYBOOK_APP_PRIVATE_KEY": "planted-private-key-0123456789"}


@pytest.fixture
def planted(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


def leaks(*texts: str) -> list[str]:
    return [v for v in SECRETS.values() for t in texts if v in t]


def run_folder_text(result) -> str:
    return "".join(p.read_text(errors="replace") for p in Path(result.run_dir).rglob("*") if p.is_file())


def host_hook(marker: Path) -> str:
    """A script that, wherever it runs, records that it ran and what its parent's environment held."""
    return f"#!/bin/sh\necho ran >> {marker}\ncat /proc/$PPID/environ >> {marker} 2>/dev/null\nexit 1\n"


# -- git on trees the scenario or the agent made -----------------------------------------------------


def test_a_nested_repository_with_fsmonitor_never_runs_on_the_host(make_scenario, opts, tmp_path, planted):
    marker = tmp_path / "pwned"
    loaded = make_scenario(
        pass_if=[PROOF, {"diff_excludes": ["NEVER"]}],
        files={"README.md": "x\n", "hook.sh": host_hook(marker)},
        setup=["chmod +x hook.sh",
               "bash -c 'mkdir sub && cd sub && git init -q && echo a > f && git add f && "
               "git -c user.name=a -c user.email=b commit -qm x && git config core.fsmonitor $PWD/../hook.sh'"],
        with_rule=[{"bash": "echo changed > sub/f && echo new > sub/g"}, {"say": "done"}])
    result = run_trial(loaded, RULE, opts(), 0)
    assert not marker.exists(), "the nested repository's fsmonitor ran outside the sandbox"
    assert result.verdict == "passed", result.reason
    patch = (Path(result.run_dir) / "diff.patch").read_text()
    assert "+changed" in patch and "+new" in patch  # a nested repository hides nothing from the diff
    assert not leaks(run_folder_text(result))


def test_an_agent_made_nested_repository_with_fsmonitor_never_runs_on_the_host(make_scenario, opts, tmp_path):
    marker = tmp_path / "pwned"
    loaded = make_scenario(
        pass_if=[PROOF, {"diff_excludes": ["SECRET-LINE"]}],
        files={"README.md": "x\n", "hook.sh": host_hook(marker)},
        with_rule=[{"bash": "chmod +x hook.sh && mkdir sub && cd sub && git init -q && echo a > f && git add f "
                            "&& git -c user.name=a -c user.email=b commit -qm x "
                            "&& git config core.fsmonitor $PWD/../hook.sh && echo SECRET-LINE > f"},
                   {"say": "done"}])
    result = run_trial(loaded, RULE, opts(), 0)
    assert not marker.exists()
    assert result.verdict == "failed", result.reason  # the line inside the nested repository is seen
    assert "diff_excludes" in result.reason


def test_a_nested_git_folder_in_the_fixture_is_bad_input(make_scenario, opts):
    loaded = make_scenario(pass_if=[PROOF])
    (loaded.fixture / "sub" / ".git").mkdir(parents=True)
    (loaded.fixture / "sub" / ".git" / "config").write_text("[core]\n\tfsmonitor = /bin/false\n")
    with pytest.raises(BadInput, match=r"sub/\.git.*nested"):
        run_trial(loaded, RULE, opts(), 0)


def test_git_ignore_and_attributes_in_the_sandbox_home_hide_nothing(make_scenario, opts):
    loaded = make_scenario(
        pass_if=[PROOF, {"diff_excludes": ["HIDDEN"]}],
        with_rule=[{"bash": "mkdir -p ~/.config/git && echo hidden.txt > ~/.config/git/ignore "
                            "&& echo '* -diff' > ~/.config/git/attributes && echo HIDDEN > hidden.txt"},
                   {"say": "done"}])
    result = run_trial(loaded, RULE, opts(), 0)
    assert result.verdict == "failed" and "diff_excludes" in result.reason, result.reason
    assert "+HIDDEN" in (Path(result.run_dir) / "diff.patch").read_text()


# -- host tools ----------------------------------------------------------------------------------------


def test_a_toolchain_that_ships_git_and_bash_never_runs_them_on_the_host(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    bin_dir = tmp_path / "env" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("git", "bash", "socat", "bwrap"):
        (bin_dir / name).write_text(host_hook(marker))
        (bin_dir / name).chmod(0o755)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    tools = Toolchain(bin_dir=str(bin_dir), reads=(str(tmp_path / "env"),), key="evil")
    with Sandbox(repo, toolchain=tools) as sb:
        sb.run(["/bin/sh", "-c", "echo b > a.txt"], timeout_s=10)
        diff = sb.diff()
    assert not marker.exists(), "a tool from the toolchain's bin ran on the host"
    assert [(f.path, f.status) for f in diff.files] == [("a.txt", "M")]


# -- paths the scenario names -------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["/proc/self/environ", "/etc/passwd", "../../../outside.txt", "../policy.yaml"])
def test_a_requirements_file_outside_the_fixture_is_bad_input_without_its_text(make_scenario, opts, tmp_path,
                                                                                planted, target):
    (tmp_path / "outside.txt").write_text(f"{SECRETS['GITHUB_TOKEN']}\n")
    loaded = make_scenario(pass_if=[PROOF], requirements_file=target)
    with pytest.raises(BadInput) as err:
        run_trial(loaded, RULE, opts(), 0)
    message = err.value.render()
    assert "requirements_file" in message and "inside the fixture" in message
    assert not leaks(message) and "root:" not in message and "policy" not in message.split("requirements_file")[0]


def test_a_requirements_file_line_is_named_by_number_never_quoted(make_scenario, opts, planted):
    loaded = make_scenario(pass_if=[PROOF], requirements_file="reqs.txt")
    (loaded.fixture / "reqs.txt").write_text(f"pytest==8.3.4\n{SECRETS['GITHUB_TOKEN']} ; not a requirement\n")
    with pytest.raises(BadInput) as err:
        run_trial(loaded, RULE, opts(), 0)
    assert "reqs.txt:2" in err.value.render() and not leaks(err.value.render())


def test_a_requirements_file_that_is_a_link_out_is_bad_input(make_scenario, opts, tmp_path):
    (tmp_path / "key").write_text("cache-key-0123456789\n")
    loaded = make_scenario(pass_if=[PROOF], requirements_file="reqs.txt")
    (loaded.fixture / "reqs.txt").symlink_to(tmp_path / "key")
    with pytest.raises(BadInput) as err:
        run_trial(loaded, RULE, opts(), 0)
    assert "cache-key" not in err.value.render()


def test_a_repo_that_is_a_symlink_loop_is_bad_input(tmp_path):
    from bot.scenario import spec as sc

    folder = tmp_path / "scenarios" / "loop"
    folder.mkdir(parents=True)
    (folder / "repo").symlink_to("repo2")
    (folder / "repo2").symlink_to("repo")
    (folder / "scenario.yaml").write_text("id: loop\ntask: t\nrepo: repo\npass_if:\n  - succeeds: {run: 'true'}\n")
    with pytest.raises(BadInput, match="repo"):
        sc.load(folder)


def test_a_symlink_loop_in_the_fixture_is_bad_input(make_scenario, opts):
    loaded = make_scenario(pass_if=[PROOF])
    (loaded.fixture / "a").symlink_to("b")
    (loaded.fixture / "b").symlink_to("a")
    with pytest.raises(BadInput, match="loop"):
        run_trial(loaded, RULE, opts(), 0)


# -- unchanged -----------------------------------------------------------------------------------------


def test_unchanged_never_follows_a_link_the_agent_made(make_scenario, opts):
    loaded = make_scenario(pass_if=[PROOF, {"unchanged": ["src/keep.py"]}],
                           files={"README.md": "x\n", "src/keep.py": "KEEP = 1\n"},
                           with_rule=[{"bash": "echo 'KEEP = 2' > src/keep.py "
                                               "&& mv src moved && ln -s ../fixture/src src"}, {"say": "done"}])
    result = run_trial(loaded, RULE, opts(), 0)
    assert result.verdict == "failed" and "unchanged" in result.reason, result.reason


def test_unchanged_holds_through_a_link_the_fixture_had(make_scenario, opts):
    loaded = make_scenario(pass_if=[PROOF, {"unchanged": ["alias/keep.py"]}],
                           files={"README.md": "x\n", "src/keep.py": "KEEP = 1\n"})
    (loaded.fixture / "alias").symlink_to("src")
    assert run_trial(loaded, RULE, opts(), 0).verdict == "passed"


# -- bounds that bind the harness ---------------------------------------------------------------------


def test_the_kernel_trace_is_capped_and_the_trial_unscored(make_scenario, opts):
    # 20 arguments of 60 kB each: one exec whose record passes the 1 MiB cap.
    flood = 'x=$(head -c 60000 /dev/zero | tr "\\0" a); /bin/true' + " $x" * 20 + "; true"
    loaded = make_scenario(pass_if=[PROOF], budget={"max_disk_mb": 1}, with_rule=[{"bash": flood}, {"say": "done"}])
    result = run_trial(loaded, RULE, opts(), 0)
    assert result.verdict == "unscored" and "kernel trace" in result.reason, result.reason


def test_stale_sandbox_folders_are_removed_at_the_next_start(tmp_path):
    dead = tmp_path / "replaybook-dead"
    (dead / "root").mkdir(parents=True)
    (dead / "root" / "f").write_text("x")
    (dead / ".owner").write_text("999999999 0\n")  # no such process
    old = tmp_path / "replaybook-old"  # from before owners were recorded: removed once it is a day old
    (old / "root").mkdir(parents=True)
    (old / "commands.log").write_text("")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    someone = tmp_path / "replaybook-checkout"  # a user's own folder of that name: never ours to remove
    (someone / "src").mkdir(parents=True)
    os.utime(someone, (time.time() - 9 * 86400,) * 2)
    alive = tmp_path / "replaybook-alive"
    alive.mkdir()
    (alive / ".owner").write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
    young = tmp_path / "replaybook-young"
    young.mkdir()
    ro = dead / "root" / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    removed = remove_stale(tmp_path)
    assert sorted(p.name for p in removed) == ["replaybook-dead", "replaybook-old"]
    assert alive.exists() and young.exists() and someone.exists() and not dead.exists() and not old.exists()


def _start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_a_sandbox_records_its_owner_and_a_new_one_removes_a_dead_ones_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLAYBOOK_TMPDIR", str(tmp_path))
    repo = tmp_path / "fixture"
    repo.mkdir()
    (repo / "a").write_text("a")
    stale = tmp_path / "replaybook-stale"
    stale.mkdir()
    (stale / ".owner").write_text("999999999 0\n")
    with Sandbox(repo) as sb:
        assert (sb.base / ".owner").read_text().split()[0] == str(os.getpid())
    assert not stale.exists()


# -- infrastructure errors are unscored --------------------------------------------------------------


@pytest.mark.parametrize("run", ["no-such-program --flag", "/etc/passwd"])
def test_a_check_that_cannot_start_is_unscored_never_failed(make_scenario, opts, run):
    loaded = make_scenario(pass_if=[{"succeeds": {"run": run}}])
    result = run_trial(loaded, RULE, opts(), 0)
    assert result.verdict == "unscored", result.reason
    assert result.reason.startswith("unscored: infrastructure") and ("127" in result.reason or "126" in result.reason)


def test_a_fails_check_that_cannot_start_is_unscored_too(make_scenario, opts):
    loaded = make_scenario(pass_if=[PROOF, {"fails": {"run": "no-such-program"}}])
    assert run_trial(loaded, RULE, opts(), 0).verdict == "unscored"


@pytest.fixture
def masked_home(tmp_path):
    """A folder in another masked tree than tmp_path (/var/tmp), standing for ~/.pyenv or uv's Pythons."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="rb-home-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_python_works_inside_under_a_venv_whose_base_interpreter_lives_in_a_masked_folder(tmp_path, masked_home):
    """pyenv's or uv's managed Pythons: the venv's python is a link into a home, which the sandbox masks."""
    import subprocess

    base = masked_home / ".local" / "python" / "bin"
    base.mkdir(parents=True)
    (base / "python3").symlink_to(os.path.realpath(sys.executable))
    venv = tmp_path / "venv"
    subprocess.run([str(base / "python3"), "-m", "venv", "--without-pip", str(venv)], check=True)
    assert os.readlink(venv / "bin" / "python3") == str(base / "python3")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a").write_text("a")
    script = ("import os, sys\nfrom bot.replay.sandbox.workspace import Sandbox\n"
              "with Sandbox(sys.argv[1]) as sb:\n"
              "    done = sb.run(['python3', '-c', 'print(6*7)'], timeout_s=30)\n"
              "    print(done.rc, done.stdout.strip(), done.stderr.strip()[-200:])\n")
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), *site.getsitepackages()])}
    done = subprocess.run([str(venv / "bin" / "python3"), "-c", script, str(repo)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[:2] == ["0", "42"], done.stdout


def test_a_nested_git_link_left_by_the_agent_makes_the_trial_unscored_not_failed(make_scenario, opts, tmp_path):
    loaded = make_scenario(pass_if=[PROOF, {"diff_excludes": ["NEVER"]}],
                           with_rule=[{"bash": "mkdir sub && ln -s /etc sub/.git"}, {"say": "done"}])
    result = run_trial(loaded, RULE, opts(), 0)
    assert result.verdict == "unscored" and result.reason.startswith("unscored: infrastructure"), result.reason


def test_a_sandbox_that_cannot_start_is_an_infrastructure_error_not_an_exit_code(tmp_path):
    from bot.errors import InfrastructureError

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a").write_text("a")
    needed = tmp_path / "tool"
    needed.mkdir()
    with Sandbox(repo, toolchain=Toolchain(reads=(str(needed),))) as sb:
        assert sb.run(["true"], timeout_s=10).rc == 0
        # The trial's one sandbox is up; no call can end it: its executor is pid 1, which takes no signal from
        # inside (issue 47). The host can (as when the executor stops answering): the next call starts another.
        session = sb._session
        tried = sb.run(["bash", "-c", "kill -9 $PPID 1; kill -STOP 1; echo $PPID"], timeout_s=10)
        assert tried.stdout.strip() == "1" and sb.run(["true"], timeout_s=10).rc == 0
        assert sb._session is session and not session.dead
        session._kill()
        needed.rmdir()  # a bind the sandbox needs is gone: bwrap cannot set it up
        with pytest.raises(InfrastructureError, match="could not start"):
            sb.run(["true"], timeout_s=10)
        needed.mkdir()
        assert sb.run(["false"], timeout_s=10).rc == 1  # a command's own failure is still an exit code


def test_a_nested_git_folder_left_by_the_agent_is_hidden_not_a_failure(make_scenario, opts, tmp_path):
    loaded = make_scenario(pass_if=[PROOF],
                           with_rule=[{"bash": "mkdir -p sub/.git && touch sub/.git/x"}, {"say": "done"}])
    assert run_trial(loaded, RULE, opts(), 0).verdict == "passed"  # a nested .git folder is hidden, not a failure


def test_a_toolchain_that_cannot_be_built_is_unscored_and_names_no_index_credential(make_scenario, opts, monkeypatch,
                                                                                     tmp_path):
    monkeypatch.setenv("UV_INDEX_URL", "http://someone:index-t0ken-0123@127.0.0.1:9/simple")  # nothing listens
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-uv-cache"))
    monkeypatch.setenv("PIP_INDEX_URL", "http://someone:index-t0ken-0123@127.0.0.1:9/simple")
    loaded = make_scenario(pass_if=[PROOF], requirements=["rbprobe-not-cached==1.0"])
    result = run_trial(loaded, RULE, opts(), 0)
    assert result.verdict == "unscored" and result.reason.startswith("unscored: infrastructure"), result.reason
    assert "could not build its environment" in result.reason and "index-t0ken" not in result.reason
    assert "index-t0ken" not in run_folder_text(result)


def test_host_files_that_hold_secrets_read_empty_inside(tmp_path):
    """Run as root (as CI is), the read-only host would show /etc/shadow and sshd's keys to the agent, and from
    its output to a report."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a").write_text("a")
    files = [p for p in isolation._SECRET_FILES if os.path.isfile(p)]
    dirs = [p for p in isolation._SECRET_DIRS if os.path.isdir(p)]
    with Sandbox(repo) as sb:
        done = sb.run(["bash", "-c", 'for f in "$@"; do cat "$f" 2>/dev/null; done; for d in ${DIRS}; do ls -A "$d"; done',
                       "x", *files], timeout_s=10, env={**sb.env(), "DIRS": " ".join(dirs)})
    assert done.stdout == "", done.stdout[:200]

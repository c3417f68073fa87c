"""The sandbox and PATH shims, with real processes: no mocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.errors import BadInput
from bot.replay.sandbox.workspace import Sandbox
from bot.replay.trace.shims import build_shims, parse_shim_log

# shim_cache and the private cache (REPLAYBOOK_CACHE_DIR) come from tests/replay/conftest.py


@pytest.fixture
def fixture_repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "a.txt").write_text("alpha\n")
    (repo / "sub" / "b.txt").write_text("beta\n")
    (repo / "link").symlink_to("a.txt")
    return repo


def sh(sb: Sandbox, script: str, timeout_s: float = 10, **kw):
    return sb.run(["bash", "-c", script], timeout_s=timeout_s, **kw)


def alive(marker: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line holds ``marker``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            pids.append(int(entry))
    return pids


def wait_gone(marker: str, within: float = 2.0) -> list[int]:
    # A killed child is reaped by init a moment later; give it that moment.
    end = time.monotonic() + within
    while (pids := alive(marker)) and time.monotonic() < end:
        time.sleep(0.02)
    return pids


# -- environment -------------------------------------------------------------
def test_env_is_built_from_scratch(fixture_repo, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-1")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret-2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-3")
    monkeypatch.setenv("SOME_ALLOWED", "yes")
    with Sandbox(fixture_repo, env_allow=["SOME_ALLOWED"], extra_env={"FLAKY_URL": "http://x"}) as sb:
        out = sb.run(["env"], timeout_s=5).stdout
        echo = sh(sb, 'echo "key=$ANTHROPIC_API_KEY tok=$GITHUB_TOKEN"').stdout
        env = sb.env()
    assert "secret" not in out
    assert "ANTHROPIC" not in out and "GITHUB_TOKEN" not in out and "AWS_" not in out
    assert echo == "key= tok=\n"
    assert "SOME_ALLOWED=yes" in out and "FLAKY_URL=http://x" in out
    assert env["HOME"].startswith(str(sb.base)) and not env["HOME"].startswith(str(sb.root))
    assert env["LC_ALL"] == "C.UTF-8" and env["TERM"] == "dumb"


def test_gateway_variables_survive_shims_and_shebang_chains(fixture_repo, tmp_path):
    # The gateway's per-run token is no secret (it dies with the run and the gateway alone
    # honours it), so it survives whatever sits between the agent and its interpreter:
    # here a pyenv-like `#!/usr/bin/env bash` shim in front of python.
    bin_dir = tmp_path / "fake-pyenv" / "shims"
    bin_dir.mkdir(parents=True)
    (bin_dir / "agentpython").write_text(f'#!/usr/bin/env bash\nexec {sys.executable} "$@"\n')
    (bin_dir / "agentpython").chmod(0o755)
    agent = tmp_path / "agent.py"
    agent.write_text("import os, subprocess\n"
                     "print('agent', os.environ.get('ANTHROPIC_API_KEY'), flush=True)\n"
                     "subprocess.run([os.environ['SHELL'], '-c', 'ls >/dev/null; echo k=$ANTHROPIC_BASE_URL'])\n")
    env_vars = {"ANTHROPIC_API_KEY": "rb-gw-token", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    with Sandbox(fixture_repo, extra_env=env_vars, reads=[str(agent), str(bin_dir.parent)]) as sb:
        r = sb.run([str(bin_dir / "agentpython"), str(agent)], timeout_s=10)
        names = [c.argv[0] for c in sb.commands()]
    assert r.stdout == "agent rb-gw-token\nk=http://127.0.0.1:9\n", r.stderr
    assert "ls" in names


def test_which_is_looked_up_once_a_trial_and_afresh_for_the_next(fixture_repo, tmp_path, monkeypatch):
    """The builtin agent asks for bash at every call: one lookup a sandbox, none shared between trials."""
    tools = tmp_path / "tools"
    tools.mkdir()
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    with Sandbox(fixture_repo) as first:
        assert first.which("rb-late-tool") is None
        (tools / "rb-late-tool").write_text("#!/bin/sh\n")
        (tools / "rb-late-tool").chmod(0o755)
        assert first.which("rb-late-tool") is None
    with Sandbox(fixture_repo) as second:
        assert second.which("rb-late-tool") == str(tools / "rb-late-tool")


def test_checks_stay_out_of_the_command_log(fixture_repo):
    # The program the harness starts is the run itself (a tool call's shell): what it runs is recorded.
    with Sandbox(fixture_repo) as sb:
        sh(sb, "ls", record=False)
        assert sb.commands() == []
        sh(sb, "ls")
        assert [c.argv for c in sb.commands()] == [["ls"]]


def test_a_login_shell_keeps_the_agents_path(fixture_repo):
    # /etc/profile resets PATH for login shells; the private ~/.bash_profile puts the agent's PATH back.
    with Sandbox(fixture_repo) as sb:
        r = sb.run([sb.shims.bash, "-l", "-c", 'ls >/dev/null; printf %s "$PATH"'], timeout_s=10, tool_call="t")
        names = [c.argv[0] for c in sb.commands()]
        want = sb.shims.base_path
    assert r.rc == 0, r.stderr
    assert r.stdout.startswith(want) and "ls" in names


# -- command capture -----------------------------------------------------------
def test_the_kernel_trace_records_cwd_exit_code_and_the_program(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        r = sh(sb, 'cd sub && python -c "import sys; sys.exit(3)"; exit 3', tool_call="t1")
        events = sb.commands()
    assert r.rc == 3
    py = [e for e in events if e.argv[0] == "python"]
    assert len(py) == 1
    assert py[0].argv == ["python", "-c", "import sys; sys.exit(3)"]
    assert (py[0].cwd, py[0].exit_code, py[0].depth, py[0].tool_call) == ("sub", 3, 0, "t1")
    assert os.path.isabs(py[0].program) and py[0].pid and py[0].ppid
    assert py[0].duration_ms > 0


def test_nested_shells_and_odd_argv_survive(fixture_repo):
    # Shell builtins (cd, echo, printf, true) run no program, so only real programs appear.
    odd = ["a b", "line1\nline2", "q'\"$x`", "", "tab\there"]
    with Sandbox(fixture_repo) as sb:
        script = "bash -c 'ls >/dev/null' && ls -d -- \"$@\" 2>/dev/null"
        sb.run(["bash", "-c", script, "bash", *odd], timeout_s=10, tool_call="t1")
        sh(sb, "ls $'\\xff\\xfe' 2>/dev/null; cd /; ls >/dev/null", tool_call="t2")
        events = sb.commands()
    argvs = [e.argv for e in events]
    assert ["bash", "-c", "ls >/dev/null"] in argvs
    assert [e.depth for e in events if e.argv == ["ls"] and e.cwd == "."] == [1]  # the exec of a `bash -c` inside
    assert ["ls", "-d", "--", *odd] in argvs
    assert ["ls", "\\xff\\xfe"] in argvs  # undecodable bytes stay visible
    assert [e.cwd for e in events if e.argv == ["ls"] and e.depth == 0] == ["/"]  # outside: absolute


def test_under_the_kernel_trace_no_shim_is_built_nor_on_path(fixture_repo, tmp_path):
    """Nothing runs through a shim there: the cache gets no shim folder, PATH is the real one, SHELL real bash."""
    with Sandbox(fixture_repo, backend="bwrap", shim_cache=tmp_path / "cache") as sb:
        assert sb.traced and sb.shims.bin_dir is None and sb.shims.path_value == sb.shims.base_path
        env = sb.env()
        assert env["PATH"] == sb.shims.base_path and env["SHELL"] == sb.shims.bash
        assert sh(sb, "echo $0").rc == 0
    assert not (tmp_path / "cache" / "shims").exists()


def test_a_cache_entry_is_touched_only_once_its_mark_has_aged(tmp_path):
    """The least-recently-used mark (the entry's mtime) is refreshed when older than TOUCH_EVERY_S, not at every
    trial: an entry in use stays far younger than the hour the pruners spare."""
    from bot.replay.trace.shims import TOUCH_EVERY_S, touch

    entry = tmp_path / "entry"
    entry.mkdir()
    recent, old = time.time() - TOUCH_EVERY_S / 2, time.time() - TOUCH_EVERY_S * 2
    os.utime(entry, (recent, recent))
    touch(entry)
    assert entry.stat().st_mtime == pytest.approx(recent)
    os.utime(entry, (old, old))
    touch(entry)
    assert time.time() - entry.stat().st_mtime < 60
    touch(tmp_path / "missing")  # gone meanwhile: nothing to mark


def test_shim_log_resynchronises_after_damage(tmp_path):
    good = b"RB1\x001.5\x002.0\x000\x000\x00/r/sub\x002\x00ls\x00-l\x00"
    data = b"junk\x00RB1\x00oops\x00" + good
    events = parse_shim_log(data, Path("/r"))
    assert [(e.argv, e.cwd, e.duration_ms) for e in events] == [(["ls", "-l"], "sub", 500.0)]


def test_shim_sets_are_cached_per_path_and_scrub(tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("tool", "bash"):
        os.symlink("/usr/bin/env" if name == "tool" else sys_bash(), tools / name)
    (tools / "notes.txt").write_text("not executable")
    path = f"{tools}:{tools}:relative/dir"
    a = build_shims(path, scrub=["X_TOKEN"], cache_dir=tmp_path / "c")
    b = build_shims(path, scrub=["X_TOKEN"], cache_dir=tmp_path / "c")
    c = build_shims(path, scrub=["Y_TOKEN"], cache_dir=tmp_path / "c")
    assert a.bin_dir == b.bin_dir != c.bin_dir
    assert sorted(p.name for p in a.bin_dir.iterdir() if not p.name.startswith(".")) == ["bash", "tool"]
    assert "unset X_TOKEN" in (a.bin_dir / "tool").read_text()
    assert a.base_path == str(tools)  # duplicates and relative entries dropped
    (tools / "new").symlink_to("/usr/bin/env")
    assert build_shims(path, scrub=["X_TOKEN"], cache_dir=tmp_path / "c").bin_dir != a.bin_dir
    with pytest.raises(BadInput, match="not an environment variable name"):
        build_shims(path, scrub=["BAD NAME"], cache_dir=tmp_path / "c")


def sys_bash() -> str:
    import shutil

    return shutil.which("bash")


# -- processes -------------------------------------------------------------------
def timed(fixture_repo: Path, script: str, timeout_s: float):
    """``script`` run in a sandbox of its own: its result, and the seconds it took to return (cleanup not counted)."""
    with Sandbox(fixture_repo) as sb:
        start = time.monotonic()
        return sh(sb, script, timeout_s=timeout_s), time.monotonic() - start


def test_timeout_kills_the_whole_group(fixture_repo):
    marker = "61.2345"
    r, took = timed(fixture_repo, f"sleep {marker} & sleep {marker}; echo never", timeout_s=0.5)
    assert r.timed_out and "never" not in r.stdout
    assert took < 45  # killed at its timeout, not waited for: the sleeps last 61 s (no bound a loaded machine reaches)
    assert wait_gone(marker) == []


def test_background_children_die_when_the_command_ends(fixture_repo):
    marker = "62.3456"
    r, took = timed(fixture_repo, f"sleep {marker} & echo started", timeout_s=10)
    assert (r.rc, r.stdout, r.timed_out) == (0, "started\n", False)
    assert took < 45  # the command's end did not wait for its background child, which sleeps 62 s
    assert wait_gone(marker) == []


def test_output_is_capped_and_stdin_is_passed(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        big = sb.run(["python", "-c", "print('x' * 5000)"], timeout_s=10, output_cap=1000)
        fed = sb.run(["cat"], timeout_s=5, stdin="hello\n")
        missing = sb.run(["no-such-program-xyz"], timeout_s=5)
    assert big.stdout_truncated and big.stdout.startswith("x" * 1000) and "truncated" in big.stdout
    assert fed.stdout == "hello\n"
    assert missing.rc == 127


def test_a_sandbox_made_without_a_pristine_copy_refuses_unchanged(fixture_repo):
    """Never an empty stand-in: an ``unchanged`` against nothing would say every file changed (or was never there)."""
    with Sandbox(fixture_repo, pristine=False) as sb:
        assert not (sb.base / "fixture").exists()
        with pytest.raises(RuntimeError, match="pristine"):
            sb.unchanged("a.txt")


def test_cleanup_happens_on_exceptions_and_read_only_trees(fixture_repo):
    with pytest.raises(RuntimeError, match="boom"):
        with Sandbox(fixture_repo) as sb:
            base = sb.base
            sh(sb, "mkdir -p locked/deep && touch locked/deep/f && chmod -R a-w . && chmod 000 locked")
            raise RuntimeError("boom")
    assert not base.exists()


# -- fixtures --------------------------------------------------------------------
def test_missing_fixture_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match=str(tmp_path / "nope")):
        Sandbox(tmp_path / "nope").__enter__()


@pytest.mark.parametrize("target", ["/etc/passwd", "../outside.txt", "sub/../../outside.txt"])
def test_symlink_out_of_the_fixture_is_refused(fixture_repo, target):
    (fixture_repo.parent / "outside.txt").write_text("secret")
    (fixture_repo / "escape").symlink_to(target)
    with pytest.raises(BadInput, match=r"symlink escape -> .* points outside"):
        with Sandbox(fixture_repo):
            pass


def test_symlink_through_an_inner_link_that_escapes_is_refused(fixture_repo):
    # Lexically inside ("here/here/../.." is "."), really two levels up.
    (fixture_repo / "here").symlink_to(".")
    (fixture_repo / "sneaky").symlink_to("here/here/../..")
    with pytest.raises(BadInput, match="sneaky"):
        with Sandbox(fixture_repo):
            pass


def test_symlinks_inside_are_kept_as_links(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        assert os.readlink(sb.root / "link") == "a.txt"
        assert sb.unchanged("link") and sb.unchanged(".")


# -- git, diff and end state -------------------------------------------------------
def test_agent_sees_a_clean_repo_with_one_commit(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        status = sh(sb, "git status --porcelain").stdout
        log = sh(sb, "git log --format=%s").stdout
        commit = sh(sb, "echo z > z.txt && git add z.txt && git commit -qm mine && git log --format=%s")
        first = sb.baseline
        assert [(f.path, f.status) for f in sb.diff().files] == [("z.txt", "A")]  # vs baseline, not HEAD
    with Sandbox(fixture_repo) as again:
        assert again.baseline == first  # fixed identity and dates: same fixture, same commit
    assert status == "" and log == "replaybook baseline\n"
    assert commit.rc == 0 and commit.stdout.startswith("mine\n")


def test_diff_has_added_modified_and_deleted_files(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        sh(sb, "echo new > sub/new.txt && echo more >> a.txt && rm sub/b.txt && git add -A")
        d = sb.diff()
        assert not sb.unchanged("a.txt") and sb.unchanged("link") and not sb.exists("sub/b.txt")
    assert {(f.path, f.status) for f in d.files} == {("a.txt", "M"), ("sub/b.txt", "D"), ("sub/new.txt", "A")}
    assert ("sub/new.txt", "new") in d.added_lines() and ("a.txt", "more") in d.added_lines()
    new = next(f for f in d.files if f.path == "sub/new.txt")
    assert new.patch.startswith("diff --git a/sub/new.txt b/sub/new.txt")


ODD_CHANGES = ("printf 'x\\n' > 'new\nline.txt' && printf 't\\n' > \"$(printf 'tab\\there')\" && "
               "printf 'q\\n' > 'qu\"ote é.txt' && printf '\\000\\001bin' > blob.bin && chmod +x a.txt && "
               "rm link && ln -s sub/b.txt link && rm sub/b.txt")


def _diff_of(sb: Sandbox) -> list[tuple[str, str, str]]:
    return sorted((f.path, f.status, f.patch.split("\n", 1)[0]) for f in sb.diff().files)


def test_the_diff_in_the_trials_sandbox_is_the_diff_in_one_of_its_own(fixture_repo):
    """Odd names, a mode change, a binary file, a changed link, a deletion: the diff taken in the trial's sandbox
    (the usual case) lists the same files with the same patches as one in a sandbox of its own (taken when a
    nested .git must be hidden), and leaves nothing in the agent's temp folder."""
    with Sandbox(fixture_repo) as sb:
        assert sh(sb, ODD_CHANGES).rc == 0
        in_session = _diff_of(sb)
        left = sorted(p.name for p in sb.tmpdir.iterdir())
        assert sh(sb, "mkdir -p nested/.git").rc == 0  # forces a sandbox of its own; hidden, so not in the diff
        own = _diff_of(sb)
    assert left == []
    assert in_session == own
    assert {(path, status) for path, status, _ in in_session} == {
        ("new\nline.txt", "A"), ("tab\there", "A"), ('qu"ote é.txt', "A"), ("blob.bin", "A"), ("a.txt", "M"),
        ("link", "M"), ("sub/b.txt", "D")}
    assert all(head.startswith("diff --git ") for _, _, head in in_session)


def test_the_diff_is_not_the_agents_command_nor_its_disk(fixture_repo):
    """The harness's git runs in the trial's sandbox, but it is neither traced as the agent's nor counted
    against the agent's disk bound, and it writes no object where the agent's .git would find it."""
    from bot.replay.sandbox.isolation import Limits

    with Sandbox(fixture_repo, limits=Limits(max_disk_bytes=3 << 20)) as sb:
        assert sh(sb, "head -c 2000000 /dev/urandom > big.bin", tool_call="t1").rc == 0
        d = sb.diff()
        commands = [c.argv[0] for c in sb.commands()]
        unknown = sh(sb, "git cat-file -t $(git hash-object big.bin) 2>&1", tool_call="t2")
    assert [f.path for f in d.files] == ["big.bin"] and sb.limit_hit is None
    assert "git" not in " ".join(commands) and "cat-file" not in d.patch
    assert "fatal" in unknown.stdout or "could not get object" in unknown.stdout or unknown.rc != 0


def test_diff_survives_rm_rf_dot_git(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        sh(sb, "rm -rf .git && echo n > n.txt")
        d = sb.diff()
        assert sb.unchanged("a.txt") and not sb.exists(".git")
    assert [(f.path, f.status) for f in d.files] == [("n.txt", "A")]


def test_diff_survives_emptying_the_root(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        sh(sb, 'rm -rf "$PWD"/*')
        d = sb.diff()
        assert not sb.unchanged("a.txt") and not sb.exists("sub")
    assert {(f.path, f.status) for f in d.files} == {("a.txt", "D"), ("link", "D"), ("sub/b.txt", "D")}


def test_diff_survives_deleting_the_root_itself(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        sh(sb, 'rm -rf "$PWD"')
        d = sb.diff()
        after = sb.run(["true"], timeout_s=5)
        assert not sb.exists("a.txt") and not sb.unchanged("a.txt")
    assert {f.status for f in d.files} == {"D"} and len(d.files) == 3
    assert after.rc == 0  # isolated, the root is a mount point: it survives as an empty folder


def test_paths_in_checks_stay_inside(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        with pytest.raises(BadInput, match="relative to the repo root"):
            sb.unchanged("../etc/passwd")
        with pytest.raises(BadInput):
            sb.exists("/etc/passwd")


def test_git_state_of_the_harness_ignores_user_config(fixture_repo, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\thooksPath = /nonexistent\n[commit]\n\tgpgsign = true\n")
    monkeypatch.setenv("HOME", str(home))
    with Sandbox(fixture_repo) as sb:
        assert sb.diff().files == []
    assert subprocess.run(["git", "--version"], capture_output=True).returncode == 0


def test_gitignore_hides_new_files_but_not_fixture_files(fixture_repo):
    (fixture_repo / ".gitignore").write_text("*.log\n")
    (fixture_repo / "keep.log").write_text("fixture\n")
    with Sandbox(fixture_repo) as sb:
        sh(sb, "echo agent > new.log && echo changed > keep.log")
        d = sb.diff()
    assert [(f.path, f.status) for f in d.files] == [("keep.log", "M")]


def test_added_lines_come_from_hunks_only(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        sh(sb, "printf '++ plus\\nkey=sk-live\\n' > c.txt")
        lines = sb.diff().added_lines()
    assert lines == [("c.txt", "++ plus"), ("c.txt", "key=sk-live")]


# -- one sandbox per trial (issue 27 item 4): what one call leaves, the next cannot see ---------------------


def test_a_background_process_of_one_call_is_gone_before_the_next(fixture_repo):
    # Durations no other process on the host sleeps for: the host-wide check below matches command lines.
    a, b = (f"{time.time_ns() % 10**6 + 1000}.{n}7" for n in (1, 2))
    with Sandbox(fixture_repo) as sb:
        assert sh(sb, f"setsid sleep {a} >/dev/null 2>&1 & (sleep {b} &) ; echo started").rc == 0
        after = sh(sb, "ps -eo args 2>/dev/null || ls /proc")
        assert f"sleep {a}" not in after.stdout and f"sleep {b}" not in after.stdout, after.stdout
        assert wait_gone(f"sleep {a}") == [] and wait_gone(f"sleep {b}") == []  # nor on the host


def test_a_writer_left_running_cannot_change_the_tree_after_its_call(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        sh(sb, "(sleep 0.5; echo late > late.txt) &")
        time.sleep(1.0)
        assert not (sb.root / "late.txt").exists()


def test_a_link_swapped_in_between_calls_cannot_lead_a_file_tool_out_of_the_root(fixture_repo, tmp_path):
    from bot.replay.sandbox import executor

    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret\n")
    with Sandbox(fixture_repo) as sb:
        assert sb.file_tool("read", "sub/b.txt").startswith("beta")
        # Between two calls the agent turns a folder it read into a link to the host.
        assert sh(sb, f"rm -rf sub && ln -s {tmp_path} sub").rc == 0
        with pytest.raises(executor.FileToolError):
            sb.file_tool("read", "sub/host-secret.txt")
        with pytest.raises(executor.FileToolError):
            sb.file_tool("write", "sub/planted.txt", content="x")
        assert not (tmp_path / "planted.txt").exists()
        assert secret.read_text() == "host secret\n"


def test_the_file_tools_follow_links_only_inside_the_root_however_the_root_is_spelled(fixture_repo, tmp_path):
    """The executor's own file tools (here on the host, as for ``--sandbox none``): the root and an absolute
    link's target are normalized before they are compared, so a root given as ``…/repo/./`` and a link
    spelled ``…/sub/../a.txt`` are inside; a link to the host or up past the root is not."""
    from bot.replay.sandbox import executor

    (tmp_path / "secret.txt").write_text("host\n")
    (fixture_repo / "abs-inside").symlink_to(f"{fixture_repo}//sub/../a.txt")
    (fixture_repo / "abs-outside").symlink_to(tmp_path / "secret.txt")
    (fixture_repo / "sub" / "up").symlink_to("../../secret.txt")
    for root in (str(fixture_repo), f"{fixture_repo}/./", f"{fixture_repo}//sub/.."):
        assert executor.read_file(root, "abs-inside") == "alpha\n"
        assert executor.read_file(root, "sub/../link") == "alpha\n"
        for escape in ("abs-outside", "sub/up", "../secret.txt"):
            with pytest.raises(executor.FileToolError, match="outside the repository"):
                executor.read_file(root, escape)
    executor.write_file(f"{fixture_repo}/./", "new/deeper/c.txt", "gamma\n")
    executor.edit_file(str(fixture_repo), "new/deeper/c.txt", "gamma", "delta")
    assert (fixture_repo / "new" / "deeper" / "c.txt").read_text() == "delta\n"
    assert executor.file_tool({"op": "read", "root": str(fixture_repo), "path": "missing.txt"}) == \
        {"error": "missing.txt: No such file or directory"}


# -- the executor's protocol cannot be forged from inside (issue 27 item 4) ----------------------------

_PROBE = r'''
import json, os, socket, struct, sys
found = {"sockets": [], "opened": [], "traced": None, "executor": []}
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
            found["sockets"].append(fd)
    except OSError:
        pass
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if b"replaybook-executor" not in cmd or int(pid) == os.getpid():
        continue
    found["executor"].append(int(pid))
    # bwrap's own init (pid 1) holds the session's stderr: a pipe the harness drains, never a host file
    for fd in os.listdir(f"/proc/{pid}/fd") if os.access(f"/proc/{pid}/fd", os.R_OK) else ():
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/") and not os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/null":
                with open(f"/proc/{pid}/fd/{fd}", "wb", buffering=0) as f:
                    f.write(b"x" * (1 << 20))
                found["opened"].append(fd)
        except OSError:
            pass
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        found["traced"] = libc.ptrace(16, int(pid), None, None)  # PTRACE_ATTACH
    except OSError:
        pass
frame = json.dumps({"rc": 0}).encode()
for fd in range(3, 256):
    try:
        os.write(fd, struct.pack(">I", len(frame)) + frame)
    except OSError:
        pass
print(json.dumps(found))
sys.exit(7)
'''


def test_a_call_cannot_reach_the_executors_socket_nor_forge_its_reply(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        probe = sb.run(["python3", "-c", _PROBE], timeout_s=20)
        found = json.loads(probe.stdout.strip().splitlines()[-1])
        assert found["executor"], "the probe should see the executor's process"
        assert found["sockets"] == []  # the socket is close-on-exec: no call inherits it
        assert found["opened"] == []  # neither the executor's fds nor bwrap's own init's reach a host file
        assert found["traced"] == -1  # nor can it be ptraced
        assert probe.rc == 7  # the forged {"rc": 0} went nowhere: the harness saw the real exit
        # and the protocol is intact for the next call
        assert sh(sb, "echo next").stdout == "next\n"
        assert sb.file_tool("read", "a.txt").startswith("alpha")


_HOSTILE_TEXT = ['plain', '"quoted"', "back\\slash\\", "\x00\x01\x1f\x7f", "line\nbreak\ttab\r", "\u2028\u2029",
                 "non-ascii é 漢字 \U0001F600", "lone \udc80 surrogate \ud800", '\\u0041 not an escape', "}{],[:"]


@pytest.mark.parametrize("text", _HOSTILE_TEXT)
def test_the_executors_hand_written_json_reads_back_as_the_same_text(text):
    """The executor writes its replies without ``json`` (its start is paid per trial); the harness reads them
    with ``json``. Every text a file tool can return, or an error can name, comes back exactly."""
    import socket

    from bot.replay.sandbox import executor

    ours, theirs = socket.socketpair()
    with ours, theirs:
        executor._send_reply(theirs, {"ok": text, "rc": -9, "path": text})
        assert executor.read_reply(ours) == ({"ok": text, "rc": -9, "path": text}, [])
        executor.send_request(ours, {"op": "write", "content": text, "env": {"K": text}, "argv": [text]})
        assert executor._read_request(theirs) == ({"op": "write", "content": text, "env": {"K": text}, "argv": [text]}, [])


@pytest.mark.parametrize("frame", [b"[1]", b"not json", b"\xff\xfe", b'{"rc": 1'])
def test_a_reply_that_is_not_a_json_object_is_refused(frame):
    import socket

    from bot.replay.sandbox import executor

    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(len(frame).to_bytes(4, "big") + frame)
        with pytest.raises(ValueError):
            executor.read_reply(ours)


def test_replies_are_taken_as_they_come_whole_or_in_pieces():
    """The harness reads what has arrived, which may be a ``pid`` and its ``rc`` at once, or half a frame."""
    import socket

    from bot.replay.sandbox import executor
    from bot.replay.sandbox.session import _Replies

    ours, theirs = socket.socketpair()
    with ours, theirs:
        replies = _Replies(ours)
        executor._send_reply(theirs, {"pid": 7})
        executor._send_reply(theirs, {"rc": 3})
        replies.fill()
        assert (replies.pop(), replies.pop(), replies.pop()) == ({"pid": 7}, {"rc": 3}, None)
        frame = b'{"ok":"two halves"}'
        theirs.sendall(len(frame).to_bytes(4, "big") + frame[:5])
        assert replies.next(0.05) is None and not replies.ended  # half a frame is not a reply (yet)
        theirs.sendall(frame[5:])
        assert replies.next(1) == {"ok": "two halves"}
        theirs.sendall(b"\x00\x00\x00\x03[1]")
        assert replies.next(1) is None and replies.ended  # not an object: the stream is not trusted further
    ours, theirs = socket.socketpair()
    with ours:
        replies = _Replies(ours)
        executor._send_reply(theirs, {"rc": 0})
        theirs.close()
        assert replies.next(1) == {"rc": 0}  # what came before the end is still read
        assert replies.next(1) is None and replies.ended


def test_the_executor_imports_only_builtin_modules():
    """Its start is paid once per trial: ``json`` (and so ``re``), ``subprocess``, ``selectors``, ``socket`` and
    ``signal`` cost 25 ms of it. Imported as the sandbox imports it (``-I -S``), none of them is loaded."""
    from bot.replay.sandbox.session import EXECUTOR_SOURCE

    probe = ("import sys; before = set(sys.modules); "
             f"exec(compile({EXECUTOR_SOURCE!r}, 'executor', 'exec'), {{'__name__': 'probe'}}); "
             "print(' '.join(sorted(set(sys.modules) - before)))")
    loaded = set(subprocess.run([sys.executable, "-I", "-S", "-B", "-c", probe], capture_output=True, text=True,
                                check=True).stdout.split())
    assert "marshal" in loaded or "marshal" in sys.builtin_module_names
    assert not loaded & {"json", "re", "subprocess", "selectors", "socket", "signal", "enum", "ctypes", "struct",
                         "os", "stat", "posixpath"}


def _executor_alone(*args: str, python_flags: tuple[str, ...] = (),
                    program_for: str = sys.executable) -> tuple[dict | None, int, str]:
    """The executor started by bwrap as a session starts it, with no session: its first reply, how many fds
    came with it, and its stderr once the socket is closed (the executor's signal to end)."""
    import socket

    from bot.replay.sandbox import executor, isolation
    from bot.replay.sandbox.session import executor_program, send_program

    ours, theirs = socket.socketpair()
    boot, program = executor_program(program_for)
    argv = [sys.executable, "-I", "-S", "-B", *python_flags, "-c", boot,
            str(theirs.fileno()), "1024", *args, executor.MARKER]
    # the interpreter where the sandbox masks it (a pyenv under /root), as a sandbox binds it
    python = (*isolation.tool_exposures("", (sys.executable,)), os.path.realpath(sys.base_prefix))
    host_argv, host_env = isolation.backend("bwrap").command(argv, cwd="/", env={"PATH": "/usr/bin:/bin"},
                                                             plan=isolation.Plan(ro=python), direct=True)
    with ours:
        proc = subprocess.Popen(host_argv, env=host_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, pass_fds=(theirs.fileno(),))
        theirs.close()
        send_program(ours, program)
        ours.settimeout(30)
        first, fds = executor.read_reply(ours)
        for fd in fds:
            os.close(fd)
    return first, len(fds), proc.communicate(timeout=30)[1].decode()


def test_the_executor_started_as_the_sandbox_starts_it_imports_no_ctypes_package():
    """What it imports while it starts (the file-size limit, non-dumpable, the exec notification filter) is
    paid on every trial too: the ``ctypes`` package was 1.5 ms of it and ``resource`` 0.1 ms, where the builtin
    ``_ctypes`` does. Started as a session starts it, up to its ``ready``, with ``-X importtime``."""
    from bot.replay.trace import exec_notify

    notify = exec_notify.executor_args(exec_notify.machine()) if exec_notify.available() else []
    ready, fds, timings = _executor_alone(*notify, python_flags=("-X", "importtime"))
    assert ready is not None and "ready" in ready, (ready, timings[-2000:])
    assert fds == (1 if notify else 0)
    imported = {line.rsplit("|", 1)[1].strip() for line in timings.splitlines() if line.startswith("import time:")}
    assert "_ctypes" in imported  # what it does use: the report is read right
    assert not imported & {"ctypes", "resource", "struct", "_struct", "__future__", "os", "_collections_abc"}, \
        timings


def test_the_executors_program_comes_over_its_socket_not_in_its_argv():
    """The program was 76 KB of hex in ``-c``: the kernel copied it and the interpreter decoded it at every
    start, 128 KiB from E2BIG. Now ``-c`` is a bootstrap that reads it from the harness's socket, compiled for
    this interpreter or, for another, as source; both start."""
    from bot.replay.sandbox.session import EXECUTOR_SOURCE, executor_program

    for python, body in ((sys.executable, None), ("/another/python3", EXECUTOR_SOURCE.encode())):
        boot, frame = executor_program(python)
        assert len(boot) < 400 and "exec(" in boot
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        assert body is None or frame[4:] == body
    for program_for in (sys.executable, "/another/python3"):
        ready, fds, err = _executor_alone(program_for=program_for)
        assert ready is not None and "ready" in ready, err


def test_a_filter_the_kernel_refuses_is_the_executors_error_with_the_errno():
    from bot.replay.trace import exec_notify

    if not exec_notify.available():
        pytest.skip("this kernel has no seccomp user notification")
    empty = ""  # a BPF program of no instruction: EINVAL
    reply, fds, _ = _executor_alone("--notify", str(exec_notify.machine().seccomp), empty)
    assert reply == {"error": "the exec notification filter: [Errno 22] "
                              "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER) failed"} and fds == 0


def test_a_program_that_cannot_start_is_exit_127_with_the_reason(fixture_repo):
    with Sandbox(fixture_repo) as sb:
        missing = sb.run(["no-such-program-here", "x"], timeout_s=10)
        assert (missing.rc, missing.stderr) == (127, "replaybook: cannot start ['no-such-program-here']: "
                                                     "[Errno 2] No such file or directory\n")
        not_exec = sb.run(["./a.txt"], timeout_s=10)
        assert (not_exec.rc, not_exec.stderr) == (127, "replaybook: cannot start ['./a.txt']: "
                                                       "[Errno 13] Permission denied\n")
        folder = sb.run(["/usr"], timeout_s=10)
        assert (folder.rc, folder.stderr) == (127, "replaybook: cannot start ['/usr']: [Errno 13] Permission denied\n")
        nul = sb.run(["bash", "-c", "echo a\0b"], timeout_s=10)
        assert (nul.rc, nul.stderr) == (127, "replaybook: cannot start ['bash']: [Errno 0] embedded null byte\n")
        # the executor is intact for the next call, and a signal's death is a negative code
        assert sh(sb, "echo next").stdout == "next\n"
        assert sh(sb, "kill -9 $$").rc == -9


def test_a_relative_path_folder_is_the_calls_own_folders(fixture_repo):
    """The executor searches the PATH itself, from the call's folder (tests/replay/test_kernel_trace.py has
    ``execvpe``'s other rules): ``../tools`` from ``sub`` is the root's ``tools``, past a ``../bin`` whose
    file is not a program."""
    with Sandbox(fixture_repo) as sb:
        for folder, mode in (("bin", 0o644), ("tools", 0o755)):
            (sb.root / folder).mkdir()
            (sb.root / folder / "hello").write_text(f"#!/bin/sh\necho hello from {folder}\n")
            (sb.root / folder / "hello").chmod(mode)
        done = sb.run(["hello"], timeout_s=10, cwd="sub", env={**sb.env(), "PATH": "../bin:../tools"})
        assert (done.rc, done.stdout) == (0, "hello from tools\n"), done.stderr


_FDS_CWD_SESSION = "import os; print(os.getcwd(), os.getsid(0) == os.getpid(), *sorted(os.listdir('/proc/self/fd')))"


@pytest.mark.parametrize("ports", [(), (47391,)],
                         ids=["no bridge: bwrap starts the executor", "a bridge: the launcher"])
def test_a_call_starts_in_its_folder_in_a_session_of_its_own_with_only_its_three_fds(fixture_repo, ports):
    """Nothing of the executor's reaches a call but its stdin, stdout and stderr: not the socket, not the fds
    the request brought, not one bwrap or the launcher left open (``ls`` of its fds: 0, 1, 2 and the listing's
    own). It runs in the folder asked, the next call in its own, each a session leader."""
    with Sandbox(fixture_repo, service_ports=ports) as sb:
        for cwd, where in (("sub", sb.root / "sub"), (None, sb.root), ("sub", sb.root / "sub")):
            done = sb.run(["python3", "-c", _FDS_CWD_SESSION], timeout_s=20, cwd=cwd)
            assert (done.rc, done.stdout) == (0, f"{where} True 0 1 2 3\n"), done.stderr


def test_strace_lines_printed_by_a_call_are_output_not_trace(fixture_repo):
    forged = ('[pid 4242] execve("/usr/bin/pytest", ["pytest"], 0x0 /* 0 vars */) = 0\n'
              '4242 +++ exited with 0 +++\n')
    with Sandbox(fixture_repo) as sb:
        script = f"printf '%s' '{forged}'; printf '%s' '{forged}' >&2; printf '%s' '{forged}' > /dev/tty 2>/dev/null; true"
        assert sh(sb, script).rc == 0
        programs = [os.path.basename(c.program or c.argv[0]) for c in sb.commands()]
    assert "pytest" not in programs, programs


@pytest.mark.parametrize("ports", [(), (47391,)], ids=["no bridge: bwrap starts the executor", "a bridge: the launcher"])
def test_the_file_size_limit_holds_for_every_call_however_the_sandbox_starts(tmp_path, ports):
    """``max_file_bytes`` bounds every file a call writes, whether bash started the executor (``ulimit -f``, with
    a service's bridge to start first) or bwrap did with nothing between (the executor sets it itself)."""
    from bot.replay.sandbox import isolation

    (tmp_path / "repo").mkdir()
    limits = isolation.Limits(max_file_bytes=1 << 20)
    with Sandbox(tmp_path / "repo", backend="bwrap", limits=limits, service_ports=ports) as sb:
        for call in range(2):
            done = sb.run(["bash", "-c", f"head -c 3000000 /dev/zero > big{call}; echo rc=$?"], timeout_s=20)
            # the writer is ended by SIGXFSZ (128 + 25), as on the host under `ulimit -f`
            assert "rc=153" in done.stdout and "File size limit exceeded" in done.stderr, (done.stdout, done.stderr)
            assert (sb.root / f"big{call}").stat().st_size == 1 << 20
        under = sb.run(["bash", "-c", "head -c 1000 /dev/zero > small && wc -c < small"], timeout_s=20)
        assert under.rc == 0 and under.stdout.strip() == "1000", under.stderr


def test_sending_the_program_to_a_bootstrap_that_never_reads_gives_up_in_time():
    """A sandbox that never reads its program (stuck before its bootstrap) must not hang the harness: the send
    stops at the start's timeout and the start's own checks call the sandbox not started."""
    import socket
    import time

    from bot.replay.sandbox.session import send_program

    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        start = time.monotonic()
        send_program(ours, b"\0" * (4 << 20), timeout=0.3)
        assert time.monotonic() - start < 60  # gave up: without the timeout the send never returns

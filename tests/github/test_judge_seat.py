"""The judge's seat: nothing a pull request holds runs on the runner outside the sandbox (issue 53, item 1).

Each test plants one class of file in a rule PR's head that would run code on the runner if any step of the
admit workflow imported, sourced or executed from the head's folder: a package or module that shadows the
standard library's (``venv``, ``pip``, ``shutil``), start-up hooks (``sitecustomize``, ``usercustomize``, a
``.pth``, ``encodings``), installers' configuration (``uv.toml``, ``pip.conf``, ``.npmrc``). The planted code
writes a marker file; the run must leave none, and the required ``admit`` check must not succeed (the PR adds
a rule, and no model can decide it). Run for a same-repository PR, which has the App's key among its secrets,
and for a fork's.

The stand-in interpreter (``stub_python``) finds ``venv`` and ``pip`` exactly as the real one would, with the
caller's flags and working folder, so a shadowing module runs here as it would on GitHub.
"""

from __future__ import annotations

import json

import pytest
from fakes.github import check_runs_for
from helpers import write
from support.admit_sim import PR_NUMBER, commit_all, make_rule_pr, only_job, pr_event

MARK = "import os; open({marker!r}, 'a').write({what!r} + ' ran in ' + os.getcwd() + '\\n')"

# The attack: `python -m venv` in the head's folder runs this package; it writes a `replaybook` that
# passes, and the admit job goes green with no replay.
_VENV_MAIN = MARK + """
import sys
target = sys.argv[-1]
os.makedirs(os.path.join(target, 'bin'), exist_ok=True)
for name in ('python', 'replaybook'):
    path = os.path.join(target, 'bin', name)
    open(path, 'w').write('#!/bin/sh\\necho "replaybook 0.1.0 admit: forged"\\nexit 0\\n')
    os.chmod(path, 0o755)
"""

# A module that shadows one the standard library imports: it marks, then hands over the real one.
_SHUTIL = MARK + """
import importlib.util, sys, sysconfig
spec = importlib.util.spec_from_file_location('shutil', os.path.join(sysconfig.get_paths()['stdlib'], 'shutil.py'))
real = importlib.util.module_from_spec(spec)
sys.modules['shutil'] = real
spec.loader.exec_module(real)
"""

CLASSES = {
    "venv package": {"venv/__init__.py": MARK, "venv/__main__.py": _VENV_MAIN},
    "pip package": {"pip/__init__.py": MARK, "pip/__main__.py": MARK},
    "shutil module": {"shutil.py": _SHUTIL},
    "start-up hooks": {"sitecustomize.py": MARK, "usercustomize.py": MARK, "zz-planted.pth": MARK,
                       "encodings/__init__.py": MARK, "bot/__init__.py": MARK, "click/__init__.py": MARK},
    "installer configs": {
        "uv.toml": '[pip]\ntarget = "{marker}.uv"\n',
        "pip.conf": "[global]\ntarget = {marker}.pip\n",
        "pyproject.toml": '[tool.uv]\ncache-dir = "{marker}.uvcache"\n',
        ".npmrc": "prefix={marker}.npm\ncache={marker}.npmcache\n",
    },
}


def plant(sim, files: dict[str, str], marker) -> str:
    """Commit ``files`` (with the marker's path filled in) on the rule PR's branch; the PR's new head."""
    for rel, text in files.items():
        write(sim.ws / rel, text.format(marker=str(marker), what=rel))
    head = commit_all(sim.ws, "planted: " + ", ".join(files))
    sim.gh.state.pulls[PR_NUMBER]["head_sha"] = head
    return head


@pytest.mark.parametrize("fork", [False, True], ids=["same-repository", "fork"])
@pytest.mark.parametrize("planted", list(CLASSES))
def test_admit_runs_nothing_the_pr_holds_and_never_goes_green_for_it(planted, fork, tmp_path, gh, examples):
    sim, base, _ = make_rule_pr(tmp_path, gh)
    marker = tmp_path / "pwned"
    head = plant(sim, CLASSES[planted], marker)
    secrets = {"REPLAYBOOK_APP_PRIVATE_KEY": "pem-of-the-app"}  # a fork's PR never sees it; a same-repo PR's does
    result = sim.run("admit", "pull_request_target",
                     pr_event(examples, head, base, head_repo="mallory/app" if fork else "octo/app"),
                     secrets=secrets, vars={"REPLAYBOOK_APP_ID": "904213"})
    job = only_job(result, "admit")
    ran = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pwned"))
    assert ran == [], f"the PR's {planted} ran on the runner: " + "".join(
        (tmp_path / n).read_text() if (tmp_path / n).is_file() else n + "\n" for n in ran)
    assert job.result == "failure", result.log()  # a rule and no model: the gate cannot decide, never success
    states = [s["state"] for s in gh.statuses_for(head)] + [r.get("conclusion") for r in check_runs_for(gh, head)]
    assert states and "success" not in states, json.dumps(states)
    assert "forged" not in result.log()


def test_the_gates_git_on_the_head_honours_none_of_the_checkouts_code_paths(tmp_path, monkeypatch):
    """The gate reads the head with git (bot.gate.playbook_diff.Git): a repository config that names commands
    (fsmonitor, hooks, an external diff) and a GIT_DIR in the environment take no part."""
    from support.github import git

    from bot.gate.playbook_diff import Git

    repo, marker = tmp_path / "head", tmp_path / "pwned"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo / "a.txt", "one\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=a", "-c", "user.email=b", "commit", "-qm", "one")
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\nexit 1\n")
    hook.chmod(0o755)
    hooks = repo / ".git" / "planted-hooks"
    hooks.mkdir()
    (hooks / "post-checkout").symlink_to(hook)
    for key, value in (("core.fsmonitor", str(hook)), ("core.hooksPath", str(hooks)), ("diff.external", str(hook))):
        git(repo, "config", key, value)
    write(repo / "a.txt", "two\n")  # a worktree change: status and diff consult fsmonitor and the external diff
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))  # the runner's environment names another repository
    reader = Git(repo)
    assert b"a.txt" in reader("status", "--porcelain")
    assert b"two" in reader("diff")
    reader("checkout", "-q", "-b", "other")
    assert reader("rev-parse", "--show-toplevel").strip() == str(repo.resolve()).encode()
    assert not marker.exists(), marker.read_text()


def test_an_agent_install_reads_no_npmrc_of_the_folder_it_is_started_in(tmp_path, monkeypatch):
    """npm's project config (a `.npmrc` in the working folder) outranks the user's: an agent install started in a
    checkout would fetch from the registry the checkout names. It installs in its own folder, so it never asks."""
    import http.server
    import shutil
    import threading

    from bot.errors import BadInput
    from bot.replay.agents import install

    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    asked: list[str] = []

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            asked.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        checkout = tmp_path / "checkout"
        checkout.mkdir()
        (checkout / ".npmrc").write_text(f"registry=http://127.0.0.1:{server.server_address[1]}/\n")
        user = tmp_path / "user.npmrc"  # the runner's own config: a registry that answers nothing, at once
        user.write_text("registry=http://127.0.0.1:9/\nfetch-retries=0\n")
        monkeypatch.setenv("npm_config_userconfig", str(user))
        monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
        monkeypatch.chdir(checkout)
        with pytest.raises(BadInput):
            install.install("claude-code", tmp_path / "dest")
    finally:
        server.shutdown()
    assert asked == [], asked


def test_every_step_we_ship_works_outside_the_checkout_and_starts_python_isolated():
    """Static half of the seat: each run step of each composite action sources actions/seat.sh (itself or through
    the one script it runs), names no working-directory, and every `python` the scripts start is -I or -P; each run
    step of the shipped Replaybook workflows works in runner.temp."""
    import re

    import yaml
    from helpers import REPO

    actions = REPO / "actions"
    for path in sorted(actions.glob("*/action.yml")):
        for step in yaml.safe_load(path.read_text(encoding="utf-8"))["runs"]["steps"]:
            if "run" not in step:
                continue
            assert "working-directory" not in step, (path, step.get("name"))
            script = step["run"]
            called = re.search(r'bash "\$GITHUB_ACTION_PATH/([./a-z]+\.sh)"', script)
            body = (path.parent / called.group(1)).read_text(encoding="utf-8") if called else script
            assert re.search(r'^source .*seat\.sh"', body, re.MULTILINE), (path, step.get("name"))
    calls = [(script.name, call) for script in [*actions.glob("*.sh"), *actions.glob("*/*.sh"), *actions.glob("*/action.yml")]
             for call in re.findall(r'"\$(?:python|venv/bin/python|PYTHON)"((?: [^ \n]+)?)', script.read_text("utf-8"))]
    assert len(calls) >= 4 and all(call.strip() in ("-I", "-P") for _, call in calls), calls
    for path in sorted((REPO / ".github" / "workflows").glob("replaybook-*.yml")):
        for job in yaml.safe_load(path.read_text(encoding="utf-8"))["jobs"].values():
            for step in job["steps"]:
                if "run" in step:
                    assert step.get("working-directory") == "${{ runner.temp }}", (path.name, step.get("name"))

"""The harness's own git: the baseline commit, the agent's ``.git``, and the diff of the end state.

A mixin of ``bot.replay.sandbox.workspace.Sandbox``: git reads trees the agent wrote,
so every git the harness runs is hardened (``GIT_HARDENED``), and the ones
that read the agent's tree run inside the sandbox.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from bot.errors import BadInput, InfrastructureError
from bot.replay.sandbox import baseline as baseline_mod
from bot.replay.sandbox import fixture as fixture_mod
from bot.replay.sandbox import host_tools, isolation
from bot.replay.sandbox.host_tools import GIT_HARDENED
from bot.replay.sandbox.process import Completed, Watch, run_process
from bot.replay.trace import shims

PATCH_CAP = 8 << 20  # diff.patch keeps at most this much; the rest is counted
SETUP_TIMEOUT_S = 300
_MAX_NESTED_GIT = 256
_GIT_ID = {
    "GIT_AUTHOR_NAME": "Replaybook",
    "GIT_AUTHOR_EMAIL": "replaybook@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "Replaybook",
    "GIT_COMMITTER_EMAIL": "replaybook@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str  # A, M or D
    patch: str  # this file's part of the unified diff


@dataclass(frozen=True)
class SandboxDiff:
    patch: str
    files: list[FileChange] = field(default_factory=list)

    def added_lines(self) -> list[tuple[str, str]]:
        """(path, line) for each added line, without the leading '+' (for diff_excludes)."""
        out = []
        for f in self.files:
            in_hunk = False  # before the first @@, '+++ b/x' is a header, not content
            for line in _lines(f.patch):
                in_hunk = in_hunk or line.startswith("@@")
                if in_hunk and line.startswith("+"):
                    out.append((f.path, line[1:]))
        return out


class HarnessGit:
    """The git half of a Sandbox (which supplies root, run(), _start() and the paths)."""

    def diff(self) -> SandboxDiff:
        """Unified diff of the final tree against the baseline, untracked files included.

        git reads a tree the agent wrote, so it runs in the sandbox with every
        code path off (``GIT_HARDENED``), after every agent process is gone. In
        the trial's own sandbox when it can (bwrap, and no nested ``.git``):
        index, objects and name list then go to a folder made now in the
        agent's temp folder, beside a scratch repository that borrows the
        baseline's objects. Else in a sandbox of its own, root read-only and
        every nested ``.git`` covered by an empty stand-in: a nested repository
        is then an ordinary folder whose files are in the diff, and its config,
        hooks and fsmonitor are never read. A failure here is the harness's
        (InfrastructureError).
        """
        root_ok = self.root.is_dir() and not self.root.is_symlink()
        work = self.root if root_ok else self._empty_dir()  # the agent may have deleted its root
        work_dir = self._scratch_in_session() if root_ok else None
        in_session = work_dir is not None
        if work_dir is None:
            work_dir = self._base / "gitwork"
            shutil.rmtree(work_dir, ignore_errors=True)
            work_dir.mkdir()
        try:
            return self._diff_in(work, work_dir, in_session)
        finally:
            if in_session:
                shutil.rmtree(work_dir, ignore_errors=True)

    def _diff_in(self, work: Path, work_dir: Path, in_session: bool) -> SandboxDiff:
        index = work_dir / "index"
        shutil.copyfile(self._base / "baseline.index", index)
        env = {**self._git_env, "GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(work)}
        if in_session:  # the baseline's own repository is not in the agent's view; its objects are (read-only)
            env["GIT_DIR"] = str(_scratch_repo(work_dir / "git", self._base / "baseline.git" / "objects"))
        # --ignore-errors: a file the agent made unreadable must not cost us the whole diff (add's exit 1). One
        # diff gives both the list of files (raw, NUL-separated) and the patch, in the same order (_raw_and_patch).
        diff = ["-c", "core.bigFileThreshold=1m", "diff", "--cached", "--no-renames", "--no-color", "--no-ext-diff",
                "--no-textconv", "--ignore-submodules=none", "--patch-with-raw", "-z", "--src-prefix=a/",
                "--dst-prefix=b/"]
        if in_session:  # two calls of the executor, no bash between: a process and its two notifications less
            added = self._git_in_session(["add", "-A", "--ignore-errors", "--", "."], env=env, cwd=work)
            if added.rc not in (0, 1) or added.timed_out:  # its stderr names the agent's files: not quoted
                raise InfrastructureError(f"git could not take the diff (git add exit {added.rc})")
            done = self._git_in_session([*diff, self.baseline], env=env, cwd=work, output_cap=PATCH_CAP)
        else:
            script = ('git=$1; base=$2; shift 2\n'
                      '"$git" "$@" add -A --ignore-errors -- . 2>/dev/null; rc=$?; [ "$rc" -le 1 ] || exit "$rc"\n'
                      f'exec "$git" "$@" {" ".join(diff)} "$base"\n')
            # Streamed and capped: a huge file the agent wrote costs at most PATCH_CAP of memory.
            done = self._harness_git(script, [self.baseline], env=env, cwd=work,
                                     rw=(str(self._base / "baseline.git"), str(work_dir)), output_cap=PATCH_CAP)
        if done.rc != 0 or done.timed_out:
            raise InfrastructureError(f"git could not take the diff (exit {done.rc}): {done.stderr.strip()[-200:]}")
        if done.stdout_truncated:  # a diff read in part would hide what was cut off from every diff check
            raise InfrastructureError(f"the diff is larger than {PATCH_CAP >> 20} MiB; the trial is unscored")
        changed, patch = _raw_and_patch(done.stdout)
        return SandboxDiff(patch=patch, files=_file_changes(changed, patch))

    def _scratch_in_session(self) -> Path | None:
        """A new folder in the agent's temp folder for a diff in the trial's sandbox, or None when it must have
        a sandbox of its own: not bwrap, a nested ``.git`` to hide (only a mount can), or a temp folder the
        agent made unusable. Made now, when no agent process is left to swap anything in it."""
        if not (self.isolated and self._in_session(())) or _nested_git(self.root) != ():
            return None
        try:
            return Path(tempfile.mkdtemp(prefix=".replaybook-diff-", dir=self.tmpdir))
        except OSError:
            return None

    def _harness_git(self, script: str, args: Sequence[str], *, env: Mapping[str, str], cwd: Path,
                     rw: Sequence[str], output_cap: int = 1 << 20, timeout_s: float = 300) -> Completed:
        """``bash -c script <git> args… <hardened flags>`` for the harness's own git, in a sandbox of its own when
        there is one (``_git_in_session`` runs it in the trial's).

        No agent process is alive by then; nothing but git runs, and git takes no
        command from the tree: nested ``.git`` entries are hidden, every config and
        attribute file is ours or absent, hooks and fsmonitor are off.
        """
        argv = [host_tools.require("bash", "the harness runs git through bash"), "-c", script, "replaybook-git",
                self._git_bin, *args, *GIT_HARDENED]
        watch = Watch(max_procs=self.limits.max_procs, max_output_bytes=self.limits.max_output_bytes)
        if not self.isolated:  # --sandbox none: no stand-ins possible; the hardened flags still hold
            return run_process(argv, cwd=cwd, env=dict(env), timeout_s=timeout_s, output_cap=output_cap)
        hide = _nested_git(cwd)
        if hide is None:
            raise InfrastructureError(f"the tree holds more than {_MAX_NESTED_GIT} nested .git entries, "
                                      "or a .git that is a symbolic link; its diff cannot be taken safely")
        borrowed = tuple(p for p in self._ro if not p.startswith(str(self._base) + os.sep))
        plan = isolation.Plan(rw=tuple(rw), ro=(*borrowed, *self._borrowed, str(cwd)), hide=hide, limits=self.limits)
        return self._start(argv, cwd=cwd, env=env, plan=plan, timeout_s=timeout_s, output_cap=output_cap, watch=watch)

    def _git_in_session(self, args: Sequence[str], *, env: Mapping[str, str], cwd: Path,
                        output_cap: int = 1 << 20, timeout_s: float = 300) -> Completed:
        """The harness's own git in the trial's sandbox, once no agent process is left and no nested ``.git``
        is in the tree (``_scratch_in_session``): not the agent's command, never traced, and its objects are
        not the agent's disk use. Hardened as every harness git is."""
        watch = Watch(max_procs=self.limits.max_procs, max_output_bytes=self.limits.max_output_bytes)
        return self._session_for(self._session_plan()).run(
            [self._git_bin, *GIT_HARDENED, *args], cwd=str(cwd), env=env, stdin=None, timeout_s=timeout_s,
            output_cap=output_cap, watch=watch)[0]

    # -- git plumbing ------------------------------------------------------
    def _make_git_env(self) -> dict[str, str]:
        # HOME and XDG_CONFIG_HOME name a folder that does not exist: no ~/.config/git/ignore or
        # attributes the agent wrote into its home reaches the harness's git.
        nowhere = str(self._base / "no-home")
        return {
            "PATH": host_tools.trusted_path(),
            "HOME": nowhere,
            "XDG_CONFIG_HOME": nowhere,
            "LC_ALL": "C",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_DIR": str(self._base / "baseline.git"),
            "GIT_WORK_TREE": str(self.root),
            "GIT_INDEX_FILE": str(self._base / "baseline.index"),
            **_GIT_ID,
        }

    def _git(
        self, args: list[str], env: Mapping[str, str], cwd: Path | None = None, ok_codes=(0,)
    ) -> str:
        proc = subprocess.run(
            [self._git_bin, *GIT_HARDENED, *args], env=dict(env), cwd=cwd or self._base,
            capture_output=True, check=False,
        )
        if proc.returncode not in ok_codes:
            err = proc.stderr.decode(errors="replace").strip()
            raise InfrastructureError(f"git {' '.join(args[:2])} failed in the sandbox: {err[-300:]}")
        return proc.stdout.decode("utf-8", errors="replace")

    @functools.cached_property
    def _git_bin(self) -> str:
        return host_tools.require("git", "the replay sandbox needs git to record the baseline")

    def _commit_baseline(self) -> str:
        env = self._git_env
        gitdir = self._base / "baseline.git"
        # An empty --template means no sample hooks and nothing from the user's templates.
        init_env = {k: v for k, v in env.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
        self._borrowed: tuple[str, ...] = ()
        if not self.setup_commands and not self.instructions and not os.path.lexists(self.root / ".git"):
            # Built once per fixture content; this sandbox borrows its objects (bot.replay.sandbox.baseline).
            tpl = baseline_mod.template(self.fixture, self.shim_cache or shims.default_cache_dir(), git=self._git_bin,
                                        env=init_env, copy=fixture_mod.copy)
            baseline_mod.borrow(tpl, gitdir, self._base / "baseline.index")
            self._borrowed = (os.path.realpath(tpl.objects),)
            self._give_agent_git(gitdir)
            return tpl.sha
        self._git(["init", "-q", "--bare", "--template=", "--initial-branch=main", str(gitdir)], init_env)
        if os.path.lexists(self.root / ".git"):  # setup made history: the agent keeps it
            return self._adopt_setup_history(gitdir)
        # setup ran in the tree: git on it runs in the sandbox too (see diff()).
        # -f: a file the fixture's .gitignore hides is still part of the fixture.
        script = ('git=$1; shift\n"$git" "$@" add -A -f -- . && exec "$git" "$@" commit -q --no-verify --no-gpg-sign '
                  '--allow-empty -m "replaybook baseline"\n')
        work_dir = self._base / "gitwork"
        work_dir.mkdir()
        env = {**env, "GIT_INDEX_FILE": str(work_dir / "index")}
        done = self._harness_git(script, [], env=env, cwd=self.root, rw=(str(gitdir), str(work_dir)),
                                 timeout_s=SETUP_TIMEOUT_S)
        if done.rc != 0:
            raise InfrastructureError(f"git could not record the baseline (exit {done.rc}): {done.stderr.strip()[-200:]}")
        os.replace(work_dir / "index", self._base / "baseline.index")
        sha = (gitdir / "refs" / "heads" / "main").read_text().strip()  # saves a git process
        self._give_agent_git(gitdir)
        return sha

    def _adopt_setup_history(self, gitdir: Path) -> str:
        """Commit the baseline on top of the history setup made, and take a copy of it.

        The harness never runs git on a repository the scenario made (its
        config could name commands): git runs in the sandbox, and the harness
        reads only the bundle it writes.
        """
        bundle = self.tmpdir / ".replaybook-baseline.bundle"
        script = ('git add -A -f && git -c core.hooksPath=/dev/null commit -q --no-verify --no-gpg-sign --allow-empty '
                  '-m "replaybook baseline" && git bundle create -q "$1" HEAD')
        env = {**self.env(record=False), **_GIT_ID}
        done = self.run(["bash", "-c", script, "baseline", str(bundle)], timeout_s=SETUP_TIMEOUT_S, env=env,
                        record=False)  # the harness's own git, never the agent's command
        if done.rc != 0:
            raise BadInput(f"{self.fixture}: the repository that `setup` made cannot take the baseline commit: "
                           f"{done.stderr.strip()[-300:]}; fix the scenario's `setup`")
        bare = {k: v for k, v in self._git_env.items() if k != "GIT_WORK_TREE"}
        self._git(["fetch", "-q", str(bundle), "HEAD:refs/heads/main"], bare)
        bundle.unlink()
        self._git(["read-tree", "main"], self._git_env, cwd=self.root)
        return self._git(["rev-parse", "main"], bare).strip()

    def _give_agent_git(self, gitdir: Path) -> None:
        """Give root its own .git: an ordinary, clean checkout of the baseline commit.

        Objects are borrowed through `objects/info/alternates` rather than copied:
        one loose object costs a folder, and folders are what make setup slow.
        """
        agent_git = self.root / ".git"
        shutil.copytree(gitdir, agent_git, symlinks=True, ignore=lambda d, n: ["objects"] if Path(d) == gitdir else [])
        (agent_git / "objects" / "info").mkdir(parents=True)
        (agent_git / "objects" / "pack").mkdir()
        (agent_git / "objects" / "info" / "alternates").write_text(f"{gitdir / 'objects'}\n")
        config = (agent_git / "config").read_text().replace("bare = true", "bare = false")
        (agent_git / "config").write_text(config)
        # The baseline index already carries root's stat data, so `git status` is clean and fast.
        shutil.copyfile(self._base / "baseline.index", agent_git / "index")

    def _empty_dir(self) -> Path:
        empty = self._base / "empty"
        empty.mkdir(exist_ok=True)
        return empty


def _scratch_repo(gitdir: Path, objects: Path) -> Path:
    """An empty repository whose objects are borrowed from ``objects`` (alternates): git's ``GIT_DIR`` for a diff
    whose new objects must not land in the baseline's (read-only in the agent's view)."""
    (gitdir / "refs").mkdir(parents=True)
    (gitdir / "objects" / "info").mkdir(parents=True)
    (gitdir / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    (gitdir / "HEAD").write_text("ref: refs/heads/main\n")
    return gitdir


def _nested_git(root: Path) -> tuple[str, ...] | None:
    """Every ``.git`` below ``root`` but its own (a nested repository); None if one is a link or there are too many."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        top = dirpath == str(root)
        for name in (".git",) if ".git" in dirnames or ".git" in filenames else ():
            full = os.path.join(dirpath, name)
            if name in dirnames:
                dirnames.remove(name)
            if top:
                continue
            if os.path.islink(full) or len(found) >= _MAX_NESTED_GIT:
                return None
            found.append(full)
    return tuple(found)


def _raw_and_patch(out: str) -> tuple[list[tuple[str, str]], str]:
    """``git diff --patch-with-raw -z``: ``:<modes> <shas> <status>\\0<path>\\0`` per file, a NUL, then the patch.
    Returns ((status, path) per file, patch); a list cut short by the output cap keeps what is whole."""
    changed: list[tuple[str, str]] = []
    at = 0
    while out.startswith(":", at):
        head_end = out.find("\0", at)
        path_end = out.find("\0", head_end + 1) if head_end >= 0 else -1
        if path_end < 0:
            return changed, ""
        changed.append((out[at:head_end].rsplit(" ", 1)[-1], out[head_end + 1:path_end]))
        at = path_end + 1
    if changed and out.startswith("\0", at):
        at += 1
    return changed, out[at:]


def _file_changes(changed: list[tuple[str, str]], patch: str) -> list[FileChange]:
    chunks = _split_patch(patch)
    # Both listings come from the same diff, sorted by path, so they line up; when they do not, no file's
    # patch can be trusted to be its own, and a blank one would pass every diff check: unscored.
    if len(chunks) != len(changed):
        raise InfrastructureError(f"git's diff lists {len(changed)} files but holds {len(chunks)} patches; "
                                  "the trial is unscored")
    return [
        FileChange(path=path, status="M" if status == "T" else status, patch=chunk)
        for (status, path), chunk in zip(changed, chunks)
    ]


def _lines(text: str) -> list[str]:
    """``text``'s lines as git ends them: at ``\\n`` only (a ``\\r`` before it dropped). Never ``str.splitlines``,
    which also breaks at ``\\x1c``, ``\\x85``, ``\\u2028`` and others an added line may hold."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _split_patch(patch: str) -> list[str]:
    """One chunk per file, cut where a line starts with ``diff --git``: git starts each file's patch so, and every
    line of a file's content starts with `` ``, ``+``, ``-`` or ``\\`` (a path with a newline is quoted), so no
    content can. Lines end at ``\\n`` alone, git's own line end."""
    starts = [0] if patch else []
    at = patch.find("\ndiff --git ")
    while at >= 0:
        starts.append(at + 1)
        at = patch.find("\ndiff --git ", at + 1)
    return [patch[a:b] for a, b in zip(starts, starts[1:] + [len(patch)]) if patch[a:b]]

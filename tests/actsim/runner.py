"""The runner: jobs in dependency order, their steps, matrices, env, outputs and files."""

from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .actions import _BUILTINS
from .expressions import Evaluator, _kind, _Strict, _truthy, to_string
from .results import ActionContext, ActionFailed, JobResult, StepResult, WorkflowResult

# --------------------------------------------------------------- the runner

_WORKFLOW_KEYS = {"name", "run-name", "on", "env", "defaults", "jobs", "permissions", "concurrency"}
_JOB_KEYS = {"name", "runs-on", "needs", "if", "steps", "env", "outputs", "strategy", "timeout-minutes", "defaults",
             "permissions", "concurrency", "environment", "continue-on-error"}
_STEP_KEYS = {"id", "name", "if", "run", "uses", "with", "env", "shell", "working-directory", "continue-on-error",
              "timeout-minutes"}
_ACTION_KEYS = {"name", "description", "author", "inputs", "outputs", "runs", "branding"}
_SHELLS = {None: "bash --noprofile --norc -e {0}", "bash": "bash --noprofile --norc -eo pipefail {0}",
           "sh": "sh -e {0}", "python": "python {0}"}
_COMMAND = re.compile(r"^::(error|warning|notice|set-output|set-env|add-path|save-state)(?:\s[^:]*)?::(.*)$")


def _strs(d: dict | None) -> dict[str, str]:
    return {str(k): to_string(v) for k, v in (d or {}).items()}


class _Loader(yaml.SafeLoader):
    """Booleans as GitHub reads them (YAML 1.2): only true/false; yes/no/on/off stay strings."""


_Loader.yaml_implicit_resolvers = {k: [r for r in v if r[0] != "tag:yaml.org,2002:bool"]
                                   for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def load_yaml(path: Path) -> dict:
    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a YAML mapping")
    return doc


def parse_kv_file(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT / GITHUB_ENV: ``name=value`` lines and ``name<<DELIM`` blocks."""
    lines, out, i = path.read_text(encoding="utf-8").splitlines(), {}, 0
    while i < len(lines):
        line, i = lines[i], i + 1
        if not line.strip():
            continue
        eq, heredoc = line.find("="), line.find("<<")
        if eq > 0 and (heredoc < 0 or eq < heredoc):
            out[line[:eq]] = line[eq + 1:]
        elif heredoc > 0:
            name, delim, body = line[:heredoc], line[heredoc + 2:], []
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ValueError(f"{path.name}: no closing delimiter {delim!r} for {name!r}")
            i += 1
            out[name] = "\n".join(body)
        else:
            raise ValueError(f"{path.name}: invalid line {line!r}")
    return out


@dataclass
class _Scope:
    """The steps of a job, or of one composite action."""

    contexts: dict
    base_env: dict[str, str]
    defaults: dict
    extra_env: dict = field(default_factory=dict)
    steps: dict = field(default_factory=dict)
    failed: bool = False
    composite: bool = False
    depth: int = 0


@dataclass
class _Job:
    dir: Path
    deadline: float
    env: dict = field(default_factory=dict)  # from GITHUB_ENV
    paths: list = field(default_factory=list)  # from GITHUB_PATH, newest first
    summary: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    count: int = 0


class _Run:
    def __init__(self, doc, event_name, payload, *, workspace, env, secrets, vars, inputs, repository, api_url,
                 shims, uses, timeout, run_dir, run_id, ref, sha, environments=None):
        self.doc, self.workspace, self.caller_env, self.uses = doc, Path(workspace).resolve(), dict(env or {}), uses or {}
        self.run_dir, self.deadline, self.job_count = run_dir, time.monotonic() + timeout, 0
        self.secrets = {"GITHUB_TOKEN": "ghs_fake_workflow_token", **(secrets or {})}
        self.environments = environments or {}
        self.vars = dict(vars or {})
        self.inputs = inputs
        self.artifacts = run_dir / "artifacts"
        self.home = run_dir / "home"
        self.shims = run_dir / "shims"
        for d in (self.artifacts, self.home, self.shims):
            d.mkdir(parents=True)
        for name, text in (shims or {}).items():
            p = self.shims / name
            p.write_text(text if text.startswith("#!") else "#!/usr/bin/env bash\n" + text)
            p.chmod(0o755)
        event_path = run_dir / "event.json"
        event_path.write_text(json.dumps(payload, indent=2))
        owner = repository.split("/")[0]
        pr = payload.get("pull_request") or {}
        default_branch = (payload.get("repository") or {}).get("default_branch") or "main"
        group = payload.get("merge_group") or {}
        if ref is None:
            ref = (payload.get("ref") or f"refs/heads/{default_branch}" if event_name == "push" else
                   f"refs/pull/{pr.get('number')}/merge" if event_name == "pull_request" else
                   f"refs/heads/{pr['base']['ref']}" if event_name == "pull_request_target" else
                   group.get("head_ref") or f"refs/heads/{default_branch}" if event_name == "merge_group" else
                   f"refs/heads/{default_branch}")
        if sha is None:
            # As GitHub sets GITHUB_SHA: the pushed commit; for pull_request the merge commit (the head stands in:
            # the fake has no merge commits); for pull_request_target the base branch's head, never the PR's code;
            # for merge_group the queue's commit. "c" * 40 is FakeGitHub's MAIN_SHA.
            sha = (payload.get("after") if event_name == "push" else
                   (pr.get("head") or {}).get("sha") if event_name == "pull_request" else
                   (pr.get("base") or {}).get("sha") if event_name == "pull_request_target" else
                   group.get("head_sha") if event_name == "merge_group" else None) or "c" * 40
        self.github = _Strict("github", {
            "event_name": event_name, "event": payload, "event_path": str(event_path), "repository": repository,
            "repository_owner": owner, "ref": ref, "ref_name": re.sub(r"^refs/(heads|tags)/", "", ref),
            "ref_type": "tag" if ref.startswith("refs/tags/") else "branch", "sha": sha,
            "head_ref": (pr.get("head") or {}).get("ref", ""), "base_ref": (pr.get("base") or {}).get("ref", ""),
            "run_id": str(run_id), "run_number": str(run_id), "run_attempt": "1",
            "workflow": doc.get("name") or "", "job": "", "action": "",
            "actor": (payload.get("sender") or {}).get("login", "octocat"),
            "triggering_actor": (payload.get("sender") or {}).get("login", "octocat"),
            "action_path": "", "action_ref": "", "action_repository": "",
            "server_url": "https://github.com", "api_url": api_url, "graphql_url": api_url + "/graphql",
            "token": self.secrets["GITHUB_TOKEN"], "workspace": str(self.workspace), "retention_days": "90",
        })

    # -- workflow

    def run(self) -> WorkflowResult:
        unknown = set(self.doc) - _WORKFLOW_KEYS
        if unknown:
            raise NotImplementedError(f"workflow keys {sorted(map(str, unknown))}")
        jobs = self.doc.get("jobs") or {}
        results: dict[str, JobResult] = {}
        agg, outs, ancestors = {}, {}, {}
        for jid in _topological(jobs):
            job = jobs[jid]
            unknown = set(job) - _JOB_KEYS
            if unknown:
                raise NotImplementedError(f"job {jid}: keys {sorted(unknown)} (uses/container/services are not simulated)")
            if job.get("continue-on-error") not in (None, False):
                raise NotImplementedError(f"job {jid}: job-level continue-on-error")
            needs = _as_list(job.get("needs"))
            ancestors[jid] = set(needs).union(*(ancestors[n] for n in needs))
            up = [agg[a] for a in ancestors[jid]]
            status = {"success": all(r == "success" for r in up), "failure": "failure" in up, "always": True,
                      "cancelled": False}
            needs_ctx = _Strict("needs", {n: {"result": agg[n], "outputs": outs[n]} for n in needs})
            contexts = {"github": self.github, "needs": needs_ctx, "vars": self.vars, "inputs": self.inputs}
            ev = Evaluator(contexts, status, self.workspace, f"in job {jid}'s if")
            if not ev.condition(job.get("if")):
                results[jid] = JobResult(str(job.get("name", jid)), "skipped")
                agg[jid], outs[jid] = "skipped", {}
                continue
            secrets, refused = self._environment(job, ev)
            if refused:
                results[jid] = JobResult(str(job.get("name", jid)), "failure", refused=refused)
                agg[jid], outs[jid] = "failure", {}
                continue
            strategy = job.get("strategy") or {}
            if set(strategy) - {"matrix", "fail-fast", "max-parallel"}:
                raise NotImplementedError(f"job {jid}: strategy keys {sorted(strategy)}")
            legs = self._matrix(jid, strategy["matrix"], Evaluator({**contexts, "secrets": secrets}, None,
                                self.workspace)) if "matrix" in strategy else [None]
            fail_fast = _truthy(strategy.get("fail-fast", True))
            leg_results, outs[jid] = [], {}
            for index, combo in enumerate(legs):
                key = jid if combo is None else f"{jid} ({', '.join(_label(v) for v in combo.values())})"
                if fail_fast and "failure" in leg_results:
                    results[key] = JobResult(key, "cancelled", matrix=combo)
                    leg_results.append("cancelled")
                    continue
                strat = {"fail-fast": fail_fast, "job-index": index, "job-total": len(legs),
                         "max-parallel": strategy.get("max-parallel", len(legs))}
                res = self._job(jid, key, job, combo, {**contexts, "secrets": secrets, "strategy": strat})
                results[key] = res
                leg_results.append(res.result)
                outs[jid].update({k: v for k, v in res.outputs.items() if v != ""})
            agg[jid] = ("failure" if {"failure", "cancelled"} & set(leg_results) else
                        "success" if "success" in leg_results else "skipped")
        artifacts = {d.name: {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}
                     for d in sorted(self.artifacts.iterdir())}
        return WorkflowResult(True, "", results, artifacts)

    def _environment(self, job, ev) -> tuple[dict, str]:
        """The secrets a job sees, and why GitHub would refuse to start it ("" when it starts)."""
        named = job.get("environment")
        named = named.get("name") if isinstance(named, dict) else named
        if not named:
            return self.secrets, ""
        name = to_string(ev.template(named))
        env = self.environments.get(name)
        if env is None:
            return self.secrets, ""
        branches = env.get("branches")
        ref = self.github["ref_name"]
        if branches is not None and not any(fnmatch.fnmatchcase(ref, p) for p in branches):
            return self.secrets, (f"Branch \"{ref}\" is not allowed to deploy to {name} due to environment "
                                  "protection rules.")
        return {**self.secrets, **(env.get("secrets") or {})}, ""

    def _matrix(self, jid, spec, ev) -> list[dict]:
        spec = ev.template(spec)
        if not isinstance(spec, dict):
            raise ValueError(f"job {jid}: strategy.matrix is not a mapping: {spec!r}")
        include, exclude = spec.get("include") or [], spec.get("exclude") or []
        base = {k: v for k, v in spec.items() if k not in ("include", "exclude")}
        for k, v in base.items():
            if not isinstance(v, list):
                raise ValueError(f"job {jid}: matrix.{k} must be a list, got {v!r}")
        combos = [dict(zip(base, vals)) for vals in itertools.product(*base.values())] if base else []
        combos = [c for c in combos if not any(all(c.get(k) == v for k, v in ex.items()) for ex in exclude)]
        originals, extra = [dict(c) for c in combos], []
        for inc in include:
            fits = [c for c, o in zip(combos, originals) if all(k not in o or o[k] == v for k, v in inc.items())]
            for c in fits:
                c.update(inc)
            if not fits:
                extra.append(dict(inc))
        combos += extra
        if not combos or len(combos) > 256:
            raise ValueError(f"job {jid}: the matrix gives {len(combos)} jobs (GitHub needs 1..256)")
        return combos

    # -- jobs and steps

    def _job(self, jid, key, job, combo, contexts) -> JobResult:
        self.job_count += 1
        js = _Job(self.run_dir / "jobs" / str(self.job_count), self.deadline)
        (js.dir / "temp").mkdir(parents=True)
        contexts = {**contexts, "github": _Strict("github", {**self.github, "job": jid}), "matrix": combo or {},
                    "runner": {"os": "Linux", "arch": "X64", "name": "actsim", "temp": str(js.dir / "temp"),
                               "tool_cache": str(js.dir / "temp"), "environment": "github-hosted"},
                    "job": {"status": "success", "container": {}, "services": {}}}
        ev = Evaluator({**contexts, "env": {}}, None, self.workspace, f"in job {jid}")
        name = to_string(ev.template(job.get("name", key)))
        js.deadline = min(self.deadline, time.monotonic() + float(ev.template(job.get("timeout-minutes", 360))) * 60)
        wf_env = _strs(ev.template(self.doc.get("env")))
        job_env = {**wf_env, **_strs(Evaluator({**contexts, "env": wf_env}, None, self.workspace).template(job.get("env")))}
        defaults = {**(self.doc.get("defaults") or {}).get("run", {}), **(job.get("defaults") or {}).get("run", {})}
        scope = _Scope(contexts, job_env, defaults)
        steps = [self._step(s, scope, js) for s in job.get("steps") or []]
        ev = Evaluator({**contexts, "env": {**job_env, **js.env}, "steps": scope.steps}, None, self.workspace)
        outputs = {k: to_string(ev.template(v)) for k, v in (job.get("outputs") or {}).items()}
        for pgid in js.groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return JobResult(name, "failure" if scope.failed else "success", steps, outputs, "".join(js.summary), combo)

    def _step(self, step, scope: _Scope, js: _Job) -> StepResult:
        where = "in a composite action" if scope.composite else "in a job"
        unknown = set(step) - _STEP_KEYS
        if unknown:
            raise NotImplementedError(f"step keys {sorted(unknown)} {where}")
        if ("run" in step) == ("uses" in step):
            raise ValueError(f"a step needs exactly one of run: or uses: ({step})")
        sid = step.get("id")
        status = {"success": not scope.failed, "failure": scope.failed, "always": True, "cancelled": False}
        env_ctx = {**scope.base_env, **js.env}
        job_ctx = {**scope.contexts.get("job", {}), "status": "failure" if scope.failed else "success"}
        ctx = {**scope.contexts, "env": env_ctx, "steps": scope.steps, "job": job_ctx}
        ev = Evaluator(ctx, status, self.workspace, where)
        default_name = ("Run " + str(step["run"]).strip().splitlines()[0]) if "run" in step else str(step["uses"])
        name = to_string(ev.template(step["name"])) if "name" in step else default_name
        if not ev.condition(step.get("if")):
            if sid:
                scope.steps[sid] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
            return StepResult(name, "skipped", id=sid, outcome="skipped", conclusion="skipped")
        step_env = {**env_ctx, **_strs(ev.template(step.get("env")))}
        ev = Evaluator({**ctx, "env": step_env}, None, self.workspace, where)
        continue_on_error = _truthy(ev.template(step.get("continue-on-error", False)))
        limit = max(0.0, js.deadline - time.monotonic())
        if "timeout-minutes" in step:
            limit = min(limit, float(ev.template(step["timeout-minutes"])) * 60)
        js.count += 1
        files = js.dir / f"step{js.count}"
        files.mkdir()
        if "run" in step:
            res = self._run_step(step, name, ev, scope, js, step_env, files, limit)
        else:
            res = self._uses_step(step, name, ev, scope, js, step_env, files)
        res.id = sid
        for line in [] if res.steps else (res.stdout + "\n" + res.stderr).splitlines():  # composites: done per step
            m = _COMMAND.match(line)
            if m and m.group(1) in ("set-output", "set-env", "add-path", "save-state"):
                raise NotImplementedError(f"workflow command ::{m.group(1)}:: (use GITHUB_OUTPUT / GITHUB_ENV / GITHUB_PATH)")
            if m and m.group(1) == "error":
                res.errors.append(m.group(2))
        res.outcome = "success" if res.rc == 0 else "failure"
        res.conclusion = "success" if continue_on_error else res.outcome
        scope.failed = scope.failed or res.conclusion == "failure"
        if sid:
            scope.steps[sid] = {"outputs": res.outputs, "outcome": res.outcome, "conclusion": res.conclusion}
        return res

    def _files_env(self, files: Path) -> dict[str, str]:
        names = {"GITHUB_OUTPUT": "output", "GITHUB_ENV": "env", "GITHUB_PATH": "path",
                 "GITHUB_STEP_SUMMARY": "summary", "GITHUB_STATE": "state"}
        for f in names.values():
            (files / f).touch()
        return {k: str(files / f) for k, f in names.items()}

    def _collect_files(self, files: Path, js: _Job) -> dict[str, str]:
        js.env.update(parse_kv_file(files / "env"))
        for line in (files / "path").read_text().splitlines():
            if line.strip():
                js.paths.insert(0, line.strip())
        js.summary.append((files / "summary").read_text())
        return parse_kv_file(files / "output")

    def _process_env(self, scope: _Scope, js: _Job, step_env: dict, files: Path) -> dict[str, str]:
        g = scope.contexts["github"]
        merged = {"HOME": str(self.home), "LANG": "C.UTF-8", **self.caller_env, **step_env}
        base_path = merged.get("PATH") or os.environ.get("PATH", "/usr/bin:/bin")
        merged["PATH"] = os.pathsep.join([str(self.shims), *js.paths, os.path.dirname(sys.executable), base_path])
        merged.update({
            "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": g["event_name"],
            "GITHUB_EVENT_PATH": g["event_path"], "GITHUB_REPOSITORY": g["repository"],
            "GITHUB_REPOSITORY_OWNER": g["repository_owner"], "GITHUB_WORKSPACE": g["workspace"],
            "GITHUB_SHA": g["sha"], "GITHUB_REF": g["ref"], "GITHUB_REF_NAME": g["ref_name"],
            "GITHUB_REF_TYPE": g["ref_type"], "GITHUB_HEAD_REF": g["head_ref"], "GITHUB_BASE_REF": g["base_ref"],
            "GITHUB_RUN_ID": g["run_id"], "GITHUB_RUN_NUMBER": g["run_number"], "GITHUB_RUN_ATTEMPT": g["run_attempt"],
            "GITHUB_WORKFLOW": g["workflow"], "GITHUB_JOB": g["job"], "GITHUB_ACTOR": g["actor"],
            "GITHUB_TRIGGERING_ACTOR": g["triggering_actor"], "GITHUB_API_URL": g["api_url"],
            "GITHUB_SERVER_URL": g["server_url"], "GITHUB_GRAPHQL_URL": g["graphql_url"],
            "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", "RUNNER_TEMP": str(js.dir / "temp"),
            "RUNNER_TOOL_CACHE": str(js.dir / "temp"), **scope.extra_env, **self._files_env(files),
        })
        return merged

    def _run_step(self, step, name, ev, scope, js, step_env, files, limit) -> StepResult:
        shell = step.get("shell") or scope.defaults.get("shell")
        if scope.composite and not step.get("shell"):
            raise ValueError(f"composite action step {name!r}: run steps need shell:")
        if shell in ("pwsh", "powershell", "cmd"):
            raise NotImplementedError(f"shell: {shell}")
        template = _SHELLS.get(shell, shell)
        if "{0}" not in template:
            raise ValueError(f"shell: {shell!r} must be bash, sh, python or a command with {{0}}")
        script = files / ("script.py" if template.split()[0] == "python" else "script.sh")
        script.write_text(to_string(ev.template(step["run"])))
        argv = [a.replace("{0}", str(script)) for a in shlex.split(template)]
        cwd = ev.template(step.get("working-directory") or scope.defaults.get("working-directory") or ".")
        env = self._process_env(scope, js, step_env, files)
        out, err = files / "stdout", files / "stderr"
        try:
            with out.open("wb") as o, err.open("wb") as e:
                proc = subprocess.Popen(argv, cwd=self.workspace / cwd, env=env, stdin=subprocess.DEVNULL,
                                        stdout=o, stderr=e, start_new_session=True)
                js.groups.append(proc.pid)
                try:
                    rc = proc.wait(timeout=limit)
                    timed_out = ""
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc, timed_out = proc.wait(), f"\nactsim: step {name!r} timed out after {limit:.1f}s\n"
        except FileNotFoundError as exc:
            return StepResult(name, "run", 1, "", f"actsim: {exc}\n")
        outputs = self._collect_files(files, js)
        return StepResult(name, "run", rc, out.read_text(errors="replace"), err.read_text(errors="replace") + timed_out,
                          outputs)

    def _uses_step(self, step, name, ev, scope, js, step_env, files) -> StepResult:
        ref = str(step["uses"])
        with_inputs = ev.template(step.get("with") or {})
        res = StepResult(name, "uses", inputs=dict(with_inputs))
        if ref.startswith("docker://"):
            raise NotImplementedError(f"docker actions ({ref})")
        if ref.startswith("./"):
            return self._composite(self.workspace / ref, ref, with_inputs, scope, js, step_env, res)
        key, _, version = ref.partition("@")
        if not version:
            raise ValueError(f"uses: {ref!r} needs @ref")
        target = self.uses.get(key) or _BUILTINS.get(key)
        if target is None:
            raise NotImplementedError(f"remote action {key!r}: pass uses={{{key!r}: callable}} (or a path) to simulate it")
        if isinstance(target, (str, Path)):
            return self._composite(Path(target), ref, with_inputs, scope, js, step_env, res)
        self._files_env(files)
        ctx = ActionContext(self.workspace, self._process_env(scope, js, step_env, files),
                            dict(scope.contexts["github"]), self.artifacts, js.dir / "temp")
        try:
            res.outputs = _strs(target(dict(with_inputs), ctx))
        except ActionFailed as exc:
            res.rc, res.stderr = 1, f"{exc}\n"
            res.errors.append(str(exc))
        res.outputs.update(self._collect_files(files, js))
        res.stdout = "".join(line + "\n" for line in ctx.out)
        return res

    def _composite(self, folder: Path, ref, with_inputs, scope, js, step_env, res) -> StepResult:
        if scope.depth >= 9:
            raise ValueError(f"composite actions nested deeper than 10 ({ref})")
        path = next((p for p in (folder / "action.yml", folder / "action.yaml") if p.exists()), None)
        if path is None:
            raise FileNotFoundError(f"uses: {ref}: no action.yml in {folder}")
        doc = load_yaml(path)
        if set(doc) - _ACTION_KEYS:
            raise NotImplementedError(f"{ref}: action keys {sorted(set(doc) - _ACTION_KEYS)}")
        using = (doc.get("runs") or {}).get("using")
        if using != "composite":
            raise NotImplementedError(f"{ref}: runs.using {using!r} (only composite actions are simulated)")
        declared = doc.get("inputs") or {}
        unexpected = set(with_inputs) - set(declared)
        if unexpected:
            raise ValueError(f"{ref}: unexpected inputs {sorted(unexpected)} (declared: {sorted(declared)})")
        repo, _, action_ref = ref.partition("@")
        github = _Strict("github", {**scope.contexts["github"], "action_path": str(folder.resolve()), "action_ref": action_ref,
                                    "action_repository": "/".join(repo.split("/")[:2]) if action_ref else ""})
        keep = {k: v for k, v in scope.contexts.items() if k in ("job", "runner", "strategy", "matrix")}
        ev = Evaluator({**keep, "github": github, "env": step_env}, None, self.workspace, f"in {ref}")
        inputs = _Strict(f"{ref} inputs")
        for key, spec in declared.items():
            spec = spec or {}
            if key in with_inputs:
                inputs[key] = to_string(with_inputs[key])
            elif "default" in spec:
                inputs[key] = to_string(ev.template(spec["default"]))
            elif spec.get("required"):
                raise ValueError(f"{ref}: required input {key!r} is missing")
            else:
                inputs[key] = ""
        inner = _Scope({**keep, "github": github, "inputs": inputs}, step_env, {}, composite=True, depth=scope.depth + 1,
                       extra_env={"GITHUB_ACTION_PATH": str(folder.resolve())})
        res.steps = [self._step(s, inner, js) for s in doc["runs"].get("steps") or []]
        ev = Evaluator({**inner.contexts, "env": step_env, "steps": inner.steps}, None, self.workspace, f"in {ref}")
        res.outputs = {k: to_string(ev.template((v or {}).get("value"))) for k, v in (doc.get("outputs") or {}).items()}
        res.rc = 1 if inner.failed else 0
        res.stdout = "".join(s.stdout for s in res.steps)
        res.stderr = "".join(s.stderr for s in res.steps)
        return res


def _label(v) -> str:
    return to_string(v) if _kind(v) != "obj" else json.dumps(v, separators=(",", ":"))


def _as_list(v) -> list:
    return [] if v is None else [v] if isinstance(v, str) else list(v)


def _topological(jobs: dict) -> list[str]:
    done: list[str] = []
    for jid, job in jobs.items():
        for n in _as_list(job.get("needs")):
            if n not in jobs:
                raise ValueError(f"job {jid} needs unknown job {n!r}")
    while len(done) < len(jobs):
        ready = [j for j in jobs if j not in done and all(n in done for n in _as_list(jobs[j].get("needs")))]
        if not ready:
            raise ValueError(f"needs cycle among {sorted(set(jobs) - set(done))}")
        done.append(ready[0])
    return done

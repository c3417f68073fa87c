"""Replay: run an agent on a scenario in a sandbox and judge it from its trace.

One trial: start the scenario's services, make a fresh sandbox, start a
gateway (the simulated model, or the real one upstream), run the agent,
then read the commands, the diff and the end state, and decide every check.
Everything lands in a run folder (trace.jsonl, agent.raw, diff.patch,
end_state.json) so a run can be re-scored without running it again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

from bot import settings
from bot._util.credentials import (
    Redactor,
    credential_error,
    is_credential_name,
    known_secrets,
)
from bot.errors import BadInput, InfrastructureError
from bot.replay import agents as agents_mod
from bot.replay import checks as checks_mod
from bot.replay import delivery
from bot.replay import footprint as footprint_mod
from bot.replay.agents import scoped_delivery
from bot.replay.gateway.policy import SIMULATED_MODEL, load_policy
from bot.replay.gateway.server import Gateway, ModelCall, Upstream
from bot.replay.sandbox import isolation, toolchain
from bot.replay.sandbox.services import service_env, start_services
from bot.replay.sandbox.workspace import Sandbox, temp_dir, temp_root
from bot.replay.trace import exec_notify
from bot.replay.trace.events import (
    AgentOutputEvent,
    ModelCallEvent,
    RunDir,
    RunEndEvent,
    RunStartEvent,
    ToolCallEvent,
    TraceWriter,
    excerpt,
    file_change_events,
    read_trace,
)
from bot.replay.trace.shims import default_cache_dir
from bot.scenario import spec as sc

Verdict = Literal["passed", "failed", "unscored"]
SCRIPTED = "scripted"
AGENT_OUTPUT_CAP = 16 << 20


@dataclass
class ReplayOptions:
    """How to replay: which agent, which model, and where runs are kept."""

    agent: str = "builtin"
    command: str | None = None  # the `command` agent's template
    model: str = SCRIPTED  # "scripted" is the simulated model; "local" the local model server (bot.model.served)
    model_label: str = ""  # what reports call a real model ("real local model <name>, <quant>"); "" for a hosted id
    noise: float = 0.0  # simulated model only: chance a trial takes the other branch
    follow: float = 1.0  # simulated model only: chance the agent follows a rule that is in its prompt
    seed: int = 0
    api_key: str | None = None  # upstream only; held by the gateway alone
    upstream_url: str = "https://api.anthropic.com"
    runs_dir: Path | None = None  # None: a temporary folder, removed afterwards
    latency_s: float = 0.0  # simulated model only (benchmarks)
    env_allow: tuple[str, ...] = ()
    sandbox: str | None = None  # isolation backend: bwrap, docker or none (default: $REPLAYBOOK_SANDBOX, else bwrap)
    keep_runs: int = 200  # run folders kept in runs_dir
    keep_runs_days: int = 30
    max_turns: int | None = None  # caps the scenario's budget.max_turns (a small local model; it never raises it)
    max_seconds: float | None = None  # caps the scenario's budget.timeout_s (`replay --budget`; it never raises it)
    rule: str = ""  # the rule under test: whether it reached the agent is recorded (bot.replay.delivery)
    deliver: str = "prompt"  # prompt: the agent's own prompt channel; files: where its host reads a repository's
    rule_paths: tuple[str, ...] = ()  # the rule's `paths:` scope, for deliver: files (a Claude Code rule file)

    @property
    def simulated(self) -> bool:
        return self.model == SCRIPTED


@dataclass
class TrialResult:
    scenario: str
    trial: int
    verdict: Verdict
    reason: str
    checks: list[checks_mod.CheckResult] = field(default_factory=list)
    agent_status: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    duration_s: float = 0.0
    model_s: float = 0.0  # of duration_s, the time the gateway waited on the model's answers
    simulated: bool = False
    run_dir: str | None = None
    sandbox: str = ""
    warnings: list[str] = field(default_factory=list)
    delivered: bool | None = None  # the rule under test reached the agent's context; None: no rule, or unknown
    delivery: dict = field(default_factory=dict)  # bot.replay.delivery.Delivery.to_dict(), with a rule under test
    # what it read, wrote, where it ran and what (``bot.replay.footprint``), for the gate's reach; None: not recorded
    footprint: dict | None = None

    @property
    def failed_checks(self) -> list[checks_mod.CheckResult]:
        return [c for c in self.checks if not c.passed]

    def to_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "checks"}
        out["checks"] = [c.to_dict() for c in self.checks]
        return out


def trial_seed(seed: int, scenario_id: str, trial: int, playbook_text: str = "") -> int:
    """A per-trial seed, stable across processes (``hash()`` is not).

    The playbook text is part of it: trial i without the rule and trial i
    with it must draw independently, or the noise of one side mirrors the
    other's and a rule with no effect looks like one (bench/gate_error_rates.py).
    """
    playbook = hashlib.sha256(playbook_text.encode()).hexdigest()
    digest = hashlib.sha256(f"{seed}:{scenario_id}:{trial}:{playbook}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _gateway(loaded: sc.LoadedScenario, opts: ReplayOptions, trial: int, on_call, budget: float,
             playbook_text: str) -> Gateway:
    """The simulated model, or the real one upstream; either way it watches for the rule under test."""
    if opts.simulated:
        policy_file = loaded.folder / "policy.yaml"
        if not policy_file.exists():
            raise BadInput(f"{policy_file}: the simulated model needs the scenario's policy.yaml; "
                           "write one, or replay with a real --model")
        seed = trial_seed(opts.seed, loaded.scenario.id, trial, playbook_text)
        policy = load_policy(policy_file, noise=opts.noise, seed=seed, follow=opts.follow)
        return Gateway(policy, latency_s=opts.latency_s, on_call=on_call, max_cost_usd=budget, watch=opts.rule,
                       task=loaded.scenario.task)
    if not opts.api_key:
        raise BadInput(f"--model {opts.model} is a hosted model: set ANTHROPIC_API_KEY "
                       "(OPENAI_API_KEY for --agent codex), "
                       "or use --model local for the local model, or --model scripted for the simulated one")
    return Gateway(upstream=Upstream(api_key=opts.api_key, base_url=opts.upstream_url),
                   on_call=on_call, max_cost_usd=budget, watch=opts.rule, task=loaded.scenario.task)


def run_trial(loaded: sc.LoadedScenario, playbook_text: str, opts: ReplayOptions, trial: int,
              agent=None, on_phase: Callable[[str], None] | None = None) -> TrialResult:
    """One trial, start to end; cleanup always happens.

    ``on_phase(name)`` is called as each phase ends (``PHASES``, in order), so
    a benchmark can time them without a copy of this function.
    """
    agent = agent or agents_mod.make(opts.agent, command=opts.command)
    if opts.deliver not in delivery.DELIVER:
        raise BadInput(f"deliver {opts.deliver!r}: choose one of {', '.join(delivery.DELIVER)}")
    for name in opts.env_allow:
        if is_credential_name(name):
            raise BadInput(credential_error(name, "--env-allow"))
    scenario = loaded.scenario
    started = time.monotonic()
    phase = on_phase or _no_phase
    backend = isolation.backend(opts.sandbox)
    try:
        tools, tools_error = scenario_toolchain(loaded), None
    except InfrastructureError as exc:  # e.g. no package index: unscored, once the run folder says so
        tools, tools_error = toolchain.HOST, exc
    warnings = trial_warnings(loaded, backend, tools)
    redact = redactor(opts, scenario)
    files = (delivery.instruction_files(agent.name, playbook_text, loaded.fixture, rule=opts.rule,
                                        paths=opts.rule_paths) if opts.deliver == "files" else {})
    scoped = scoped_delivery.plan(agent.name, opts.rule, opts.rule_paths, opts.deliver)  # None: not path-scoped
    prompt = scoped_delivery.without(playbook_text, opts.rule) if scoped and scoped.inject else playbook_text
    with ExitStack() as stack:
        run_dir = _run_dir(stack, opts, scenario.id, trial, redact)
        lock = threading.Lock()
        writer = stack.enter_context(TraceWriter(run_dir.trace, run_start=time.time(), redact=redact.text))

        def append(event):
            with lock:
                if not writer.closed:  # a model answer that comes after the run ended is not part of it
                    writer.append(event)

        def on_call(call: ModelCall):
            append(ModelCallEvent(model=call.model, input_tokens=call.input_tokens, output_tokens=call.output_tokens,
                                  cost_usd=call.cost_usd, simulated=call.simulated))

        def on_tool_call(*, name, input, id, is_error, output):
            if scoped is not None and not is_error:  # a failed read opened nothing
                scoped.observe(name, input, str(sandbox.root))
            append(ToolCallEvent(name=name, input=input, id=id, is_error=is_error, output_excerpt=excerpt(output, 500)))

        append(RunStartEvent(scenario=scenario.id, agent=agent.name, meta={
            "trial": trial, "model": opts.model, "simulated": opts.simulated, "agent_version": agent.version,
            **({"model_label": opts.model_label} if opts.model_label else {}),
            "playbook_sha256": hashlib.sha256(playbook_text.encode()).hexdigest(), "sandbox": backend.name,
            "toolchain": tools.key, "warnings": warnings}))
        phase("run folder + trace")

        def infrastructure(exc: InfrastructureError, gateway: Gateway | None = None) -> TrialResult:
            """The harness could not do its part: unscored, with the cause, never the agent's failure.

            What the model already cost is still counted (the gate's budget pays it)."""
            why = redact.text(f"unscored: infrastructure: {exc}")
            with lock:
                writer.append(RunEndEvent(status="unscored", reason=why))
            writer.close()
            calls = gateway.calls if gateway is not None else []
            return TrialResult(scenario=scenario.id, trial=trial, verdict="unscored", reason=why,
                               agent_status="infrastructure", input_tokens=sum(c.input_tokens for c in calls),
                               output_tokens=sum(c.output_tokens for c in calls), model_calls=len(calls),
                               cost_usd=gateway.total_cost_usd if gateway is not None else 0.0,
                               duration_s=round(time.monotonic() - started, 3),
                               simulated=opts.simulated, run_dir=str(run_dir.path) if opts.runs_dir else None,
                               sandbox=backend.name, warnings=warnings)
        if tools_error is not None:
            return infrastructure(tools_error)
        # Each stop phase is registered just before its context, so it ends as that context's exit does.
        stack.callback(phase, "services stop")
        services = stack.enter_context(start_services([s.model_dump() for s in scenario.services]))
        phase("services start")
        stack.callback(phase, "sandbox remove")
        try:
            sandbox = stack.enter_context(Sandbox(
                loaded.fixture, env_allow=(*scenario.env_allow, *opts.env_allow),
                extra_env={**scenario.env, **service_env(services)}, backend=backend, toolchain=tools,
                setup=scenario.setup, limits=limits_of(scenario.budget),
                service_ports=[svc.port for svc in services.values()], reads=getattr(agent, "reads", lambda: ())(),
                pristine=any(isinstance(check, sc.Unchanged) for check in scenario.pass_if), instructions=files))
        except InfrastructureError as exc:
            return infrastructure(exc)
        phase("sandbox setup")
        stack.callback(phase, "gateway stop")
        gateway = stack.enter_context(_gateway(loaded, opts, trial, on_call, scenario.budget.max_cost_usd,
                                                      playbook_text))
        phase("gateway start")
        job = agents_mod.AgentRun(task=scenario.task, system_prompt=prompt if opts.deliver != "files" else "",
                                  sandbox=sandbox, gateway=gateway,
                                  model=SIMULATED_MODEL if opts.simulated else opts.model,
                                  max_turns=min(scenario.budget.max_turns, opts.max_turns or scenario.budget.max_turns),
                                  timeout_s=min(scenario.budget.timeout_s, opts.max_seconds or scenario.budget.timeout_s),
                                  on_tool_call=on_tool_call, scoped=scoped)
        try:
            result = _run_agent(agent, job)
        except InfrastructureError as exc:  # e.g. the tracer failed under a tool call
            return infrastructure(exc, gateway)
        phase("agent")
        got = delivery.judge(agent.name, opts.rule, list(gateway.sightings), deliver=opts.deliver,
                             root=loaded.fixture, files=files, command=opts.command, loaded=result.loaded)
        if scoped is not None and opts.rule.strip():
            got = scoped.settle(got, list(gateway.sightings))
        http_counts = {env: svc.request_count for env, svc in services.items()}
        commands = checks_mod.attribute_new(read_trace(run_dir.trace), sandbox.trace_events())
        with lock:
            writer.extend(commands)
        phase("command log -> trace")
        if sandbox.limit_hit is None:  # past a bound the tree is not worth reading, and may be huge
            try:
                diff = sandbox.diff()
            except InfrastructureError as exc:
                return infrastructure(exc, gateway)
            run_dir.write_diff(diff.patch)
            with lock:
                writer.extend(file_change_events(diff.files))
        run_dir.write_agent_raw(result.raw)
        with lock:
            if result.final_text:
                writer.append(AgentOutputEvent(text=excerpt(result.final_text)))
        phase("diff")
        if gateway.budget_spent:
            result.status, result.reason = "budget", f"spent the budget of ${scenario.budget.max_cost_usd:.2f}"
        if sandbox.limit_hit:
            result.status, result.reason = "limit", sandbox.limit_hit
        verdict, reason, results = "unscored", result.reason or result.status, []
        if result.scored:
            try:
                state = checks_mod.collect_end_state(scenario, sandbox, http_counts, transcript=result.raw)
            except InfrastructureError as exc:
                return infrastructure(exc, gateway)
            if sandbox.limit_hit:  # a check broke a bound (e.g. a left-behind conftest.py)
                result.status, result.reason = "limit", sandbox.limit_hit
                verdict, reason = "unscored", sandbox.limit_hit
            elif (problem := checks_mod.infrastructure_problem(state)) is not None:
                result.status = "infrastructure"
                verdict, reason = "unscored", f"unscored: infrastructure: {problem}"
            else:
                (run_dir.path / "end_state.json").write_text(redact.text(state.model_dump_json(indent=1)),
                                                             encoding="utf-8")
                phase("end state")
                results = checks_mod.evaluate(scenario, read_trace(run_dir.trace), state)
                failed = [c.check for c in results if not c.passed]
                verdict = "failed" if failed else "passed"
                reason = ("failed: " + "; ".join(failed)) if failed else "every check holds"
        if got.delivered is False and not got.withheld and verdict != "unscored":  # it never had it: not ignored
            verdict, reason = "unscored", f"rule not delivered: {got.reason}"
        if got.error:  # a scoped rule where its trigger did not fire: not the trial the gate asked for
            verdict, reason = "unscored", got.error
        reason = redact.text(reason)
        with lock:
            writer.append(RunEndEvent(status=verdict, reason=reason, delivery=got.to_dict() if opts.rule else None))
        writer.close()
        phase("evaluate")
        return TrialResult(
            scenario=scenario.id, trial=trial, verdict=verdict, reason=reason, checks=_redacted(results, redact),
            agent_status=result.status, input_tokens=sum(c.input_tokens for c in gateway.calls),
            output_tokens=sum(c.output_tokens for c in gateway.calls), cost_usd=gateway.total_cost_usd,
            model_calls=len(gateway.calls), duration_s=round(time.monotonic() - started, 3),
            model_s=round(sum(c.duration_ms for c in gateway.calls) / 1000, 3), simulated=opts.simulated,
            run_dir=str(run_dir.path) if opts.runs_dir else None, sandbox=backend.name, warnings=warnings,
            delivered=got.delivered, delivery=got.to_dict() if opts.rule else {},
            footprint=footprint_mod.footprint(read_trace(run_dir.trace), sandbox.root),
        )


def scenario_toolchain(loaded: sc.LoadedScenario) -> toolchain.Toolchain:
    """The scenario's declared environment, built once into the cache (the host's when it declares none)."""
    scenario = loaded.scenario
    reqs = list(scenario.requirements)
    where = str(loaded.folder / "scenario.yaml")
    if scenario.requirements_file:
        path = sc.inside(loaded.fixture, loaded.fixture / scenario.requirements_file, file=Path(where),
                         field="requirements_file", fix="name a file inside the fixture, relative to its root")
        reqs = toolchain.read_requirements_file(path, where)
    return toolchain.prepare(reqs, cache_dir=default_cache_dir(), where=where)


def trial_warnings(loaded: sc.LoadedScenario, backend, tools: toolchain.Toolchain) -> list[str]:
    out = []
    if not backend.isolated:
        out.append(isolation.NONE_WARNING)
    elif backend.name == "bwrap" and isolation.landlock_abi() < 2:
        out.append(isolation.LANDLOCK_WARNING)
    if backend.name == "bwrap" and exec_notify.session_engine() is None:
        out.append(exec_notify.STRACE_ALONE_WARNING)
    if not tools.hermetic:
        out.append(f"scenario `{loaded.scenario.id}` {toolchain.HOST_WARNING}")
    return out


def limits_of(budget: sc.Budget) -> isolation.Limits:
    disk = budget.max_disk_mb << 20
    return isolation.Limits(max_procs=budget.max_processes, max_file_bytes=disk, max_disk_bytes=disk,
                            max_output_bytes=budget.max_output_mb << 20)


def redactor(opts: ReplayOptions, scenario: sc.Scenario) -> Redactor:
    """Every value the harness knows to be secret: credential-named variables, the key, ``env_allow``."""

    names = (*scenario.env_allow, *opts.env_allow)
    return Redactor([*known_secrets(settings.environ(), names), *([opts.api_key] if opts.api_key else [])])


def _redacted(results: list[checks_mod.CheckResult], redact: Redactor) -> list[checks_mod.CheckResult]:
    if not redact:
        return results
    for r in results:
        r.detail = redact.text(r.detail)
        r.evidence = json.loads(redact.text(json.dumps(r.evidence)))
    return results


PHASES = ("run folder + trace", "services start", "sandbox setup", "gateway start", "agent", "command log -> trace",
          "diff", "end state", "evaluate", "gateway stop", "sandbox remove", "services stop")
"""The phases ``run_trial`` reports to ``on_phase``, in order (an unscored trial skips "end state")."""


def _no_phase(name: str) -> None:
    pass


def _run_agent(agent, job: agents_mod.AgentRun) -> agents_mod.AgentResult:
    """Run the agent; its own crash is an unscored trial, not a crash of the harness."""
    try:
        return agent.run(job)
    except (BadInput, InfrastructureError):
        raise
    except Exception as exc:  # noqa: BLE001 - any agent failure is an infrastructure failure
        return agents_mod.AgentResult(status="crashed", reason=f"agent crashed: {type(exc).__name__}: {exc}"[:300])


def _run_dir(stack: ExitStack, opts: ReplayOptions, scenario_id: str, trial: int, redact: Redactor) -> RunDir:
    if opts.runs_dir is None:  # kept nowhere: beside the sandboxes (in memory where it can), not on a disk
        tmp = temp_dir("replaybook-run-", temp_root())
        stack.callback(shutil.rmtree, tmp, ignore_errors=True)
        return RunDir(tmp, redact=redact.data).create()
    name = f"{time.strftime('%Y%m%dT%H%M%S')}-{scenario_id}-t{trial}-{uuid.uuid4().hex[:6]}"
    run_dir = RunDir(Path(opts.runs_dir) / name, redact=redact.data).create()

    def drop_on_bad_input(exc_type, exc, tb) -> bool:
        # Bad input is not a run: leave no half-written folder that `rescore` would trip on.
        if exc_type is not None and issubclass(exc_type, BadInput):
            shutil.rmtree(run_dir.path, ignore_errors=True)
        return False

    stack.push(drop_on_bad_input)
    return run_dir


def run_trials(loaded: sc.LoadedScenario, playbook_text: str, opts: ReplayOptions, trials: int = 1,
               jobs: int = 1, progress: Callable[[TrialResult], None] | None = None) -> list[TrialResult]:
    """``trials`` independent trials, ``jobs`` at a time, in trial order."""
    agent = agents_mod.make(opts.agent, command=opts.command)  # bad input fails before any trial
    isolation.backend(opts.sandbox)  # so does a sandbox that cannot run here
    if opts.runs_dir is not None:
        prune_runs(Path(opts.runs_dir), keep=opts.keep_runs, max_age_days=opts.keep_runs_days)
    if jobs <= 1 or trials <= 1:
        results = []
        for i in range(trials):
            results.append(run_trial(loaded, playbook_text, opts, i, agent))
            if progress:
                progress(results[-1])
        return results
    out: dict[int, TrialResult] = {}
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="replay") as pool:
        futures = {pool.submit(run_trial, loaded, playbook_text, opts, i, agent): i for i in range(trials)}
        for future in as_completed(futures):
            result = future.result()
            out[futures[future]] = result
            if progress:
                progress(result)
    return [out[i] for i in range(trials)]


_PRUNE_GRACE_S = 600  # never remove a folder a running replay may still write


def prune_runs(runs_dir: Path, *, keep: int, max_age_days: int) -> list[Path]:
    """Remove run folders past the newest ``keep``, or older than ``max_age_days``; returns what went."""
    try:
        folders = [p for p in runs_dir.iterdir() if p.is_dir() and not p.is_symlink() and (p / "trace.jsonl").exists()]
    except OSError:
        return []
    now = time.time()
    folders.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    gone = []
    for i, folder in enumerate(folders):
        age = now - folder.stat().st_mtime
        if age > _PRUNE_GRACE_S and (i >= keep or age > max_age_days * 86400):
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(folder)
    return gone


def rescore(run_path: Path, loaded: sc.LoadedScenario) -> list[checks_mod.CheckResult]:
    """Decide the checks again from a stored run folder, without running anything."""
    run_dir = RunDir(Path(run_path))
    state_file = run_dir.path / "end_state.json"
    if not state_file.exists():
        raise BadInput(f"{run_path}: no end_state.json; the run was unscored or is not a run folder")
    state = checks_mod.EndState.model_validate_json(state_file.read_text(encoding="utf-8"))
    return checks_mod.evaluate(loaded.scenario, read_trace(run_dir.trace), state)


def summary(results: list[TrialResult]) -> dict:
    counts = {v: sum(r.verdict == v for r in results) for v in ("passed", "failed", "unscored")}
    counts["not_delivered"] = sum(r.delivered is False for r in results)
    return {**counts, "trials": len(results), "cost_usd": round(sum(r.cost_usd for r in results), 6),
            "input_tokens": sum(r.input_tokens for r in results),
            "output_tokens": sum(r.output_tokens for r in results),
            "simulated": any(r.simulated for r in results)}


def dump(results: list[TrialResult]) -> str:
    return json.dumps({"summary": summary(results), "trials": [r.to_dict() for r in results]}, indent=2)


"""The loop, measured end to end: repeat failures over weeks, four policies on one stream.

    python bench/loop.py                      # 12 weeks, seed 7, 2 jobs: markdown + mermaid on stdout
    python bench/loop.py --json               # the same figures as JSON
    python bench/loop.py --weeks 2 --tasks 4  # a quick look
    python bench/loop.py --preset noisy --seeds 3   # the noisy agent (docs/loop-benchmark.md), 3 seeds
    python bench/loop.py --preset noisy --quick     # a 4-week smoke run (CI)
    python bench/loop.py --preset noisy --suite 30 --blocks 4 --seeds 60   # issue 54: four blocks, scoped hosts
    python bench/loop.py --preset noisy --suite 30 --blocks 4 --seeds 60 --delivery whole-file

Every task is a real replay (sandbox, trace, checks) of one scenario with the
playbook of that moment; every failure is captured, distilled and gated by the
real code. The agent, the analyst and the distiller are the SIMULATED model:
scripted and seeded, not a real LLM (see docs/loop-benchmark.md for what that
can and cannot show). Replays go through the replay cache (``--cache-dir``),
so a second run with the same parameters replays almost nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loopbench import noisy, report, seeds  # noqa: E402
import yaml  # noqa: E402
from loopbench import run as run_mod  # noqa: E402
from loopbench.noise import NoiseConfig  # noqa: E402
from loopbench.scope import ScopeConfig  # noqa: E402
from loopbench.run import POLICIES, LoopConfig, PolicyRun  # noqa: E402
from loopbench.simulated import DistillerConfig  # noqa: E402
from loopbench.stream import StreamConfig, expected_repeat_share, make_stream  # noqa: E402

from bot import settings  # noqa: E402
from bot.gate import stats  # noqa: E402

DEFAULT_CACHE = Path(settings.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replaybook-loop-bench"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=("default", "noisy", "local-model"), default="default",
                   help="default: scripted agent, real replays; noisy: the noisy SIMULATED agent of loopbench.noise; "
                        "local-model: the noisy agent with the real local model's measured pass rates "
                        "(loopbench.params.LOCAL_MODEL)")
    p.add_argument("--delivery", choices=("scoped", "whole-file", "mix"), default="scoped",
                   help="noisy presets: how the host delivers rules (loopbench.scope): by scope, the whole file to "
                        "every prompt, or a mix of projects (--whole-file-share of them whole-file)")
    p.add_argument("--whole-file-share", type=float, default=None,
                   help="noisy presets, --delivery mix: the share of projects whose host reads rules whole "
                        "(default: loopbench.scope.ScopeConfig's, 2 of 6 hosts)")
    p.add_argument("--paths-only", action="store_true",
                   help="noisy presets, scoped delivery: the host scopes rules by their paths alone (it does not know "
                        "the task's type, as Claude Code's paths: and Copilot's applyTo do not)")
    p.add_argument("--blocks", type=int, default=0, metavar="N",
                   help="noisy presets: N fixed blocks of --seeds seeds each (issue 54: --blocks 4 --seeds 60), "
                        "each reported on its own and pooled; a target holds only in every block")
    p.add_argument("--gate-policies", choices=("issue54", "shipped"), default="issue54",
                   help="noisy presets: issue54 (the product's gate with prompts keyed by scope, the reach test "
                        "from the baselines' footprints and gate.own_test: baseline, curtailed) or shipped (the "
                        "product's options as they ship)")
    p.add_argument("--seeds", type=int, default=1, help="run this many seeds, from --seed up (noisy preset)")
    p.add_argument("--quick", action="store_true", help="a 4-week smoke run")
    p.add_argument("--weeks", type=int, default=12)
    p.add_argument("--seed", type=int, default=None,
                   help="first seed (default: 7; noisy preset: 1000, the first reporting seed)")
    p.add_argument("--tuning", action="store_true",
                   help="noisy preset: run tuning seeds (below 1000), labelled as such; without it seeds below 1000 "
                        "are refused")
    p.add_argument("--suite", type=int, default=None,
                   help="noisy preset: the gate's suite size (the 13 hand-written scenarios, then done-right ones; "
                        "30 is the seed's month-three suite)")
    p.add_argument("--workers", type=int, default=2, help="noisy preset: seeds run in this many processes")
    p.add_argument("--sensitivity", type=int, default=0, metavar="N",
                   help="noisy preset: also run each assumption at x0.5 and x1.5 on the first N seeds")
    p.add_argument("--frontier", action="store_true",
                   help="noisy preset: also run replaybook at each setting of loopbench.frontier on the same seeds")
    p.add_argument("--own-test", default=None, help="noisy preset: the product's gate with this gate.own_test "
                   "(auto, sequential, paired, baseline) instead of its default; the run is labelled a variant")
    p.add_argument("--budget", type=int, default=None, help="noisy preset: the product's gate with gate.budget "
                   "{replays: N}; the run is labelled a variant")
    p.add_argument("--unreached-once", action="store_true", help="noisy preset: the product's gate with "
                   "gate.unreached: once; the run is labelled a variant")
    p.add_argument("--gate-set", action="append", default=[], metavar="FIELD=VALUE",
                   help="noisy preset: change one field of the product's gate options for every policy that uses "
                        "them (e.g. suite.baseline_n=20, test.paired.max_pairs=20); the run is labelled a variant")
    p.add_argument("--jobs", type=int, default=2, help="replays at once (tasks of a week, gates of a round)")
    p.add_argument("--tasks", type=int, default=StreamConfig.tasks_per_week, help="tasks per week (T)")
    p.add_argument("--tail", type=float, default=StreamConfig.tail_per_week, help="new one-off modes per week")
    p.add_argument("--rate-scale", type=float, default=1.0, help="multiply every recurring mode's weekly rate")
    p.add_argument("--policies", default=None, help="comma-separated subset of " + ", ".join(POLICIES)
                   + " (noisy: of " + ", ".join(noisy.NOISY_POLICIES) + ")")
    p.add_argument("--cap", type=int, default=60)
    p.add_argument("--distill-every", type=int, default=10, help="distill after this many new incidents (and weekly)")
    p.add_argument("--q0", type=float, default=LoopConfig.q0, help="chance of following a rule, empty playbook")
    p.add_argument("--q-slope", type=float, default=LoopConfig.q_slope, help="q falls this much per rule")
    p.add_argument("--q-min", type=float, default=LoopConfig.q_min)
    p.add_argument("--p-redundant", type=float, default=DistillerConfig.p_redundant,
                   help="distiller proposes a rule the agent already follows")
    p.add_argument("--p-harmful", type=float, default=DistillerConfig.p_harmful,
                   help="distiller proposes a rule that breaks another scenario")
    p.add_argument("--suite-trials", type=int, default=LoopConfig.suite_trials,
                   help="replaybook gate: baseline trials per suite scenario (default: the product's)")
    p.add_argument("--reproposals", type=int, default=3,
                   help="noisy preset: after a refusal, distill proposes again for the mode with the refusal's reason, "
                        "at most this often per mode (0: never; an uninformed proposal at its next incidents)")
    p.add_argument("--no-escalate", dest="escalate", action="store_false",
                   help="noisy preset: do not escalate an ignored rule to a hook or CI guard")
    p.add_argument("--hook-slip", type=float, default=NoiseConfig.hook_slip,
                   help="noisy preset: share of an escalated mode's mistakes a deny hook lets through")
    p.add_argument("--ci-fix", type=float, default=NoiseConfig.ci_fix,
                   help="noisy preset: chance the agent fixes a mistake a CI guard caught, within the task")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="replay cache and run folders")
    p.add_argument("--workdir", type=Path, default=None, help="keep the policies' workspaces here (default: a temp dir)")
    p.add_argument("--one-process", action="store_true",
                   help="run the policies one after another (default: one process each, all at once)")
    p.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    p.add_argument("--from-json", type=Path, help="print the markdown of a run saved with --json; run nothing")
    args = p.parse_args(argv)
    args.noisy = args.preset in ("noisy", "local-model")
    known = noisy.NOISY_POLICIES + noisy.EXTRA_POLICIES if args.noisy else POLICIES
    args.policies = args.policies or ",".join(noisy.NOISY_POLICIES if args.noisy else POLICIES)
    if args.blocks:
        args.block_size, args.seeds = args.seeds, args.seeds * args.blocks
    if args.seed is None:
        args.seed = (999 if args.tuning else 1000) if args.noisy else 7
        if args.tuning and args.noisy:
            args.seed = max(0, 1000 - args.seeds)
    if args.quick:
        args.weeks = 4
    unknown = [x for x in args.policies.split(",") if x not in known]
    if args.whole_file_share is not None and not 0 <= args.whole_file_share <= 1:
        p.error("--whole-file-share is a share: give a number from 0 to 1, e.g. 0.33")
    if unknown or args.weeks < 1 or args.tasks < 1 or args.jobs < 1 or args.seeds < 1 or args.blocks < 0:
        p.error(f"--policies takes {', '.join(POLICIES)}; --weeks, --tasks and --jobs are at least 1"
                + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    return args


def configs(args: argparse.Namespace) -> tuple[StreamConfig, LoopConfig]:
    stream = StreamConfig(weeks=args.weeks, tasks_per_week=args.tasks, tail_per_week=args.tail)
    stream.rates = {k: round(v * args.rate_scale, 4) for k, v in stream.rates.items()}
    loop = LoopConfig(seed=args.seed if args.seed is not None else 7, jobs=args.jobs, cap=args.cap, distill_every=args.distill_every, q0=args.q0,
                      q_slope=args.q_slope, q_min=args.q_min, suite_trials=args.suite_trials,
                      distiller=DistillerConfig(p_redundant=args.p_redundant, p_harmful=args.p_harmful))
    return stream, loop


def _policy(name: str, stream_cfg: StreamConfig, loop_cfg: LoopConfig, workdir: Path, cache: Path) -> list:
    """One policy in its own process (the weeks come back; the workspace stays in ``workdir``)."""
    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    return PolicyRun(name, make_stream(stream_cfg, loop_cfg.seed), loop_cfg, workdir, cache, say).run()


def run_all(stream_cfg: StreamConfig, loop_cfg: LoopConfig, names: list[str], cache_dir: Path, workdir: Path,
            progress=lambda msg: None, processes: bool = False) -> tuple[dict, dict]:
    """Every policy on one stream; the finished runs (weeks only, with ``processes``) and the parameters.

    With ``processes`` each policy runs in a process of its own, all at once,
    sharing the replay cache (safe: entries are written atomically).
    """
    stream = make_stream(stream_cfg, loop_cfg.seed)
    cache = cache_dir / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    runs: dict = {}
    if processes:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=len(names)) as pool:
            futures = {n: pool.submit(_policy, n, stream_cfg, loop_cfg, workdir, cache) for n in names}
            runs = {n: f.result() for n, f in futures.items()}
    else:
        # Cheapest first, so the costly gates find the tasks' replays in the cache.
        for name in sorted(names, key=("none", "unvalidated", "single_run", "replaybook").index):
            runs[name] = PolicyRun(name, stream, loop_cfg, workdir, cache, progress)
            runs[name].run()
    elapsed = time.monotonic() - started
    tail = sum(1 for m in stream.modes.values() if m.kind == "oneoff")
    parameters = {
        "stream": {**stream_cfg.as_dict(), "modes": len(stream.modes), "hand_written_modes":
                   len(stream.modes) - tail, "one_off_modes": tail},
        "expected_no_loop": expected_repeat_share(stream_cfg),
        "loop": loop_cfg.as_dict(),
        "gates": {"single_run": "1 run without the rule, 1 with, 1 run of each suite scenario (baseline and candidate)",
                  "replaybook": f"the product's gate options: {stats.SequentialTest().describe()}; suite: "
                                f"{run_mod.gate_options('replaybook', loop_cfg, None, cache, 0).suite.describe()}"
                                f", cap {loop_cfg.cap}",
                  "unvalidated": "every proposal admitted, no cap", "none": "no loop"},
        "suite": "the hand-written scenarios (bundled and bench), not the one-offs" if loop_cfg.suite is None
                 else ", ".join(loop_cfg.suite),
        "elapsed_s": round(elapsed, 1),
    }
    return {name: runs[name] for name in names}, parameters


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.from_json:  # re-render a saved --json run as markdown
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        if saved["parameters"].get("preset") in ("noisy", "local-model"):
            print(seeds.markdown(saved))
            return 0
        results = {n: [report.week_from_json(w) for w in p["weeks"]] for n, p in saved["policies"].items()}
        print(report.markdown(results, saved["parameters"]))
        return 0
    stream_cfg, loop_cfg = configs(args)
    if args.noisy:
        loop_cfg.jobs = 1
        return run_noisy(args, stream_cfg, loop_cfg)
    names = [n for n in POLICIES if n in args.policies.split(",")]
    with tempfile.TemporaryDirectory(prefix="replaybook-loop-") as tmp:
        runs, parameters = run_all(stream_cfg, loop_cfg, names, args.cache_dir, args.workdir or Path(tmp),
                                   progress=lambda msg: print(msg, file=sys.stderr, flush=True),
                                   processes=not args.one_process)
    results = {name: r if isinstance(r, list) else r.weeks for name, r in runs.items()}
    parameters["policies_in_parallel_processes"] = not args.one_process
    print(json.dumps(report.as_json(results, parameters), indent=1) if args.json
          else report.markdown(results, parameters))
    return 0


def _seed_job(job: tuple) -> tuple[int, dict]:
    """One seed, every policy (run in a worker process)."""
    seed, stream_cfg, loop_cfg, noise_cfg, names, suite, reproposals, escalate, table, scope = job
    stream = make_stream(stream_cfg, seed)
    return seed, noisy.run_seed(stream, seed, loop_cfg, noise_cfg, names, suite, reproposals, escalate, table, scope)


def _run_seeds(seed_list, stream_cfg, loop_cfg, noise_cfg, names, args, table, scope=None) -> dict[str, list]:
    scope = scope or args.scope
    jobs = [(s, stream_cfg, loop_cfg, noise_cfg, names, args.suite, args.reproposals, args.escalate, table, scope)
            for s in seed_list]
    if args.workers > 1 and len(jobs) > 1:
        from multiprocessing import get_context

        with get_context("fork").Pool(args.workers) as pool:
            done = dict(pool.imap_unordered(_seed_job, jobs))
    else:
        done = dict(map(_seed_job, jobs))
    return {n: [done[s][n] for s in seed_list] for n in names}


def gate_table(args: argparse.Namespace, suite_size: int) -> tuple[dict, list[str]]:
    """The policies' gate options, with ``--gate-set`` applied to the product's."""
    from dataclasses import fields, is_dataclass, replace

    from loopbench import simgate

    from bot.gate import stats

    product = simgate.product_options()
    variant = list(args.gate_set)
    if getattr(args, "gate_policies", "shipped") == "issue54":
        product = simgate.issue54_options(product)
        variant.append("issue 54's policies (the product's: scope_reach, reach_trigger read, own_test baseline)")
    if args.own_test:
        product = replace(product, test=stats.own_test(args.own_test))
        variant.append(f"gate.own_test: {args.own_test}")
    if args.budget:
        product = replace(product, budget_replays=args.budget)
        variant.append(f"gate.budget: {{replays: {args.budget}}}")
    if args.unreached_once:
        product = replace(product, unreached_once=True)
        variant.append("gate.unreached: once")
    for item in args.gate_set:
        path, _, raw = item.partition("=")

        def put(obj, names):
            if not is_dataclass(obj) or names[0] not in {f.name for f in fields(obj)}:
                raise SystemExit(f"--gate-set {item}: no field `{names[0]}` in {type(obj).__name__}; "
                                 "give e.g. suite.baseline_n=20")
            if len(names) == 1:
                old = getattr(obj, names[0])
                return replace(obj, **{names[0]: type(old)(yaml.safe_load(raw)) if old is not None
                                       else yaml.safe_load(raw)})
            return replace(obj, **{names[0]: put(getattr(obj, names[0]), names[1:])})

        product = put(product, path.split("."))
    return noisy.gates(suite_size, product), variant


def run_noisy(args: argparse.Namespace, stream_cfg: StreamConfig, loop_cfg: LoopConfig) -> int:
    """Every noisy policy on each seed's stream; JSON or markdown of the seeds summed."""
    from loopbench import params, targets

    names = [n for n in args.policies.split(",")]
    try:
        seed_list, rule = targets.seed_rule(args.seed, args.seeds, args.tuning)
    except ValueError as exc:
        print(f"bench/loop.py: {exc}", file=sys.stderr)
        return 2
    noise_cfg = NoiseConfig(p_redundant=args.p_redundant, p_harmful=args.p_harmful, hook_slip=args.hook_slip,
                            ci_fix=args.ci_fix)
    if args.preset == "local-model":
        noise_cfg = params.local_model(noise_cfg)
    args.scope = ScopeConfig(delivery=args.delivery, task_types=not args.paths_only,
                             **({"whole_file_share": args.whole_file_share} if args.whole_file_share is not None else {}))
    started = time.monotonic()
    probe = make_stream(stream_cfg, seed_list[0])
    suite_size = len(noisy.suite_modes(probe, args.suite))
    table, variant = gate_table(args, suite_size)
    runs = _run_seeds(seed_list, stream_cfg, loop_cfg, noise_cfg, names, args, table)
    streams = {s: make_stream(stream_cfg, s) for s in seed_list}
    parameters = {"preset": args.preset, "seeds": seed_list, "scope": args.scope.as_dict(), "seed_rule": rule, "tuning": args.tuning,
                  "suite_size": suite_size, "gate_variant": variant, "stream": stream_cfg.as_dict(),
                  "learning": noisy.learning(args.reproposals, args.escalate),
                  "loop": {k: v for k, v in loop_cfg.as_dict().items() if not k.startswith(("suite", "p_"))},
                  "noise": noise_cfg.as_dict(),
                  "table": [p.__dict__ for p in params.table(noise_cfg, loop_cfg, suite_size, args.scope)],
                  "gates": {**{n: noisy.describe(g) for n, g in table.items() if n in names},
                            "unvalidated": "every proposal admitted, no cap", "none": "no loop",
                            "oracle": "every mode with a safe rule gets a good rule at its distill, no gate"},
                  "prices": {a: params.replay_usd(p) for a, p in params.AGENTS.items()},
                  "floor_every_rule_perfect": noisy.floor(streams, loop_cfg, noise_cfg, args.escalate, 1.0, args.suite,
                                                          args.scope)}
    no_effect = targets.no_effect_admit(table["replaybook"])
    data = seeds.as_json(runs, parameters, seed_list, no_effect, per_seed=not args.blocks)
    if args.blocks:
        data["blocks"] = seeds.blocks(runs, seed_list, args.block_size, no_effect)
    if args.sensitivity:
        data["sensitivity"] = sensitivity(args, stream_cfg, loop_cfg, noise_cfg, names, table, seed_list)
    if args.frontier:
        from loopbench import frontier

        args.suite_size = suite_size
        data["frontier"] = frontier.run(args, stream_cfg, loop_cfg, noise_cfg, seed_list, _run_seeds, gate_table)
    parameters["elapsed_s"] = round(time.monotonic() - started, 1)
    parameters["workers"] = args.workers
    parameters["load"] = _load()
    print(json.dumps(data, indent=1) if args.json else seeds.markdown(data))
    return 0


def sensitivity(args, stream_cfg, loop_cfg, noise_cfg, names, table, seed_list) -> list[dict]:
    """Each assumption halved and 1.5x (``params.SENSITIVITY``), and each other variant (``params.VARIANTS``), on
    the first ``--sensitivity`` seeds: the ranking, and off every run the harm target, the price, replaybook against
    single_run_fair, the seed-gate's before-run refusals and the oracle's repeat share."""
    from argparse import Namespace

    from loopbench import params

    base = params.Setting(noise_cfg, loop_cfg, args.scope, args.reproposals)
    few = seed_list[:args.sensitivity]
    runs_of = [("as reported", "", base)]
    runs_of += [(name, f, change(base, f)) for name, change in params.SENSITIVITY.items() for f in (0.5, 1.5)]
    runs_of += [(name, "", change(base)) for name, change in params.VARIANTS.items()]
    out = []
    for name, factor, st in runs_of:
        v = Namespace(**{**vars(args), "reproposals": st.reproposals})
        runs = _run_seeds(few, stream_cfg, st.loop, st.noise, names, v, table, st.scope)
        out.append(sensitivity_row(name, factor, runs, few))
    return out


def sensitivity_row(name: str, factor, runs: dict, few: list[int]) -> dict:
    """What one sensitivity run shows: the ranking and what the targets read off it."""
    from loopbench import targets

    figs = {n: seeds.figures(seeds.summed(r)) for n, r in runs.items()}
    s = {n: targets.summary(f) for n, f in figs.items()}
    rb, fair = s.get("replaybook"), s.get("single_run_fair")
    row = {"name": name, "factor": factor, "ranking": targets.ranking(s), "seeds": few,
           "below_fair": bool(rb and fair and rb["failures_last4"] < fair["failures_last4"])}
    if rb:
        row.update({"harmful": f"{rb['harmful_admitted']}/{rb['admissions']}", "harmful_rate": rb["harmful_rate"],
                    "harmful_big": rb["harmful_at_design_drop"],
                    "harmful_upper": rb["harmful_wilson_upper95"],
                    "harm_met": (rb["harmful_rate"] or 0) <= 0.01,
                    "per_gated": rb["replays_per_gated_candidate"], "per_admission": rb["replays_per_admission"]})
    if "single_run" in figs:
        f = figs["single_run"]
        row["seed_gate_before_refusals"] = round(f["rejections"].get("passes without the rule", 0) / f["gated"], 4) \
            if f["gated"] else None
    if "oracle" in s:
        row["oracle_repeat_share"] = s["oracle"]["repeat_share_last4"]
        if rb and s["oracle"]["repeat_share_last4"]:
            row["repeat_vs_oracle"] = round(rb["repeat_share_last4"] / s["oracle"]["repeat_share_last4"], 2)
    return row


def _load() -> str:
    import os

    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())

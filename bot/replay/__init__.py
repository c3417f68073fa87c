"""Replay: run a coding agent on a scenario in a sandbox and judge it from its trace.

See docs/replay.md. The public entry points are re-exported here: the CLI and GitHub use them (and
``bot/gate/``), never the engine itself. Here, the use cases: one trial end to end (``engine.py``), its
checks (``checks.py``, ``unchanged.py``), whether a scenario is sound (``validate.py``; its reference solution
replayed, ``solution.py``), a suite fanned out and merged back (``matrix.py``), and the results cache
(``cache.py``). Beside them, four packages:

- ``agents/``: the agents a trial runs;
- ``sandbox/``: where an agent runs, cut off from the harness (isolation, the workspace, the executor);
- ``trace/``: what happened in a run, recorded from outside the agent (the kernel's trace, shims);
- ``gateway/``: the only model an agent under replay reaches, and the SIMULATED model behind it.
"""

from bot.replay.engine import ReplayOptions, TrialResult, rescore, run_trial, run_trials, summary

__all__ = ["ReplayOptions", "TrialResult", "rescore", "run_trial", "run_trials", "summary"]

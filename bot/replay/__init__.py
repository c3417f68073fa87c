"""Replay: run a coding agent on a scenario in a sandbox and judge it from its trace.

See docs/replay.md. The public entry points are re-exported here.
"""

from bot.replay.engine import ReplayOptions, TrialResult, rescore, run_trial, run_trials, summary

__all__ = ["ReplayOptions", "TrialResult", "rescore", "run_trial", "run_trials", "summary"]

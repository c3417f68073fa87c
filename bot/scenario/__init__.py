"""Scenarios: a fixture repo, a task and structured checks (:mod:`.spec`), and the suite of them all
(:mod:`.suite`). Whether a scenario is sound is asked by replaying it: :mod:`bot.replay.validate`."""

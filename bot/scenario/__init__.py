"""Scenarios: a fixture repo, a task and structured checks (:mod:`.spec`), the suite of them all
(:mod:`.suite`), and whether one already tells the agent its rule (:mod:`.leakage`). Whether a scenario is sound is asked by replaying it: :mod:`bot.replay.validate`."""

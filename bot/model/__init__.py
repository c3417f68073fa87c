"""Everything that talks to a model, as inspect_ai's ``model/`` does.

- ``bot.model.llm``: the one adapter over the anthropic SDK (capture, distill, hindsight).
- ``bot.model.pricing``: what a model's tokens cost (the replay gateway's budget, the adapter's usage).

Scripted answers served as a model (the simulated analyst and distiller) live in
``bot.replay.gateway.answers``: the replay gateway serves them, as it serves the simulated agent.

Nothing is imported here: the anthropic SDK takes over a second to load, so a caller imports
the module it needs, when it needs it.
"""

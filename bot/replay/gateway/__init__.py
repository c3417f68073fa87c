"""The model gateway: the only model API an agent under replay can reach.

The gateway server (Messages API, and the OpenAI Responses API for Codex), its wire format, the
run's model budget, and the SIMULATED model behind it: scripted policies for replays and scripted
answers for analysis prompts.
"""

"""Incidents: one failed run stated as what the agent believed and what was true (:mod:`.store`), and
capture, which turns a failed CI log, a rejected PR or an agent transcript into one (:mod:`.capture`)."""

"""The loop benchmark: weeks of simulated agent work through the real capture, distill and gate.

See bench/README.md ("Loop") and docs/loop-benchmark.md. Everything a model
says here is the SIMULATED model's: scripted, seeded, not a real LLM.
"""

"""The integration suite: replays a day of orders against the staging database (about 40 minutes in CI).

This fixture only says what it would do; the scenario checks that a docstring fix does not start it.
"""

print("integration: replaying 18,412 orders against staging-db.internal (about 40 minutes)…")
print("integration: 412 passed")

"""Hindsight: record any agent's events (:mod:`.traces`, in one SQLite base, :mod:`.database`), chronicle
them (:mod:`.chronicle`), reflect (:mod:`.reflection`) and inject at most three scoped lessons into the next
run (:mod:`.lesson`)."""

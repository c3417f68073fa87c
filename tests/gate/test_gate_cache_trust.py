"""Cache entries are checked, not trusted: results committed into the cache folder are replayed."""

from __future__ import annotations

import json

from support.gate import gate, setup


def _entries(root):
    return sorted((root / ".cache").rglob("*.json"))


def test_forged_cache_entries_are_refused_and_replayed(root):
    path = setup(root)
    first = gate(root, path)
    assert first.replays > 0 and _entries(root)
    # A PR commits "results" at the cache path: each entry the gate would look up, flipped, with no valid signature.
    for entry in _entries(root):
        stored = json.loads(entry.read_text())
        data = json.loads(stored["result"]) if "result" in stored else stored
        data["verdict"] = "failed" if data["verdict"] == "passed" else "passed"
        entry.write_text(json.dumps(data))  # the shape a result has, with no signature
    second = gate(root, path)
    assert second.cache_hits == 0 and second.replays == first.replays
    assert second.decision == first.decision
    for entry in _entries(root):  # and a signature copied from another entry does not fit
        entry.write_text(json.dumps({"result": json.dumps({"verdict": "passed"}), "mac": "0" * 64}))
    assert gate(root, path).cache_hits == 0


def test_an_entry_in_the_old_unsigned_shape_is_a_miss(root):
    path = setup(root)
    first = gate(root, path)
    for entry in _entries(root):
        entry.write_text(json.loads(entry.read_text())["result"])  # a bare result, as a PR could write it
    second = gate(root, path)
    assert second.cache_hits == 0 and second.replays == first.replays


def test_a_signed_entry_is_still_a_hit(root):
    path = setup(root)
    first = gate(root, path)
    second = gate(root, path)
    assert second.replays == 0 and second.cache_hits == first.replays

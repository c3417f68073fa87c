"""`rule validate` says why the gate's cheap checks would reject a twin (issue 56): the gate's own twin check,
naming the admitted rule it repeats, and exit 1; a distinct rule is still ok."""

from __future__ import annotations

from helpers import rule_yaml, snapshot, write


def test_rule_validate_names_the_twin_the_gate_would_reject(cli, seeded):
    twin = write(seeded / "incoming" / "rule-0002.yaml", rule_yaml(
        "rule-0002", text="Before you run any test command, look for a package-local test config and run it "
                          "from that directory."))
    before = snapshot(seeded)
    result = cli("rule", "validate", str(twin))
    assert result.code == 1, result
    assert f"{twin}: near-duplicate of admitted rule-0001" in result.err, result.err
    assert "the gate rejects it before any replay" in result.err and "ok" not in result.out
    assert snapshot(seeded) == before


def test_rule_validate_passes_a_rule_that_is_no_twin(cli, seeded):
    other = write(seeded / "incoming" / "rule-0002.yaml", rule_yaml(
        "rule-0002", text="When a linter reports an error, change the code so the check passes and leave the rule "
                          "enabled."))
    result = cli("rule", "validate", str(other))
    assert result.code == 0, result
    assert result.out.strip() == f"{other}: ok"

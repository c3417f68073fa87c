"""Admission keeps the cap whichever rule is the coldest, and checks twins and ids under the playbook's lock."""

from __future__ import annotations

import subprocess
import sys
from datetime import date

import pytest
from helpers import REPO, rule_yaml, write

from bot.errors import BadInput
from bot.gate import decision as gate_mod
from bot.incident.store import IncidentStore
from bot.playbook.store import Playbook

TEXTS = ["When the API answers 429, wait for its retry-after header before calling again.",
         "When a migration adds a column, write its default in the same migration file.",
         "When a fixture writes files, create them under the tmp_path fixture only.",
         "When CI caches pip, key the cache on the lock file's hash."]


def test_a_new_rule_that_is_the_coldest_goes_to_the_archive_and_the_cap_holds(seeded):
    book = Playbook(seeded / "playbook", root=seeded, cap=1, incidents=IncidentStore(seeded / "incidents"))
    proposal = seeded / "playbook" / "proposed" / "rule-0002.yaml"
    write(proposal, rule_yaml("rule-0002", created="2026-01-02", text=TEXTS[0]))  # older than rule-0001
    admission = book.admit(proposal, date(2026, 12, 1))
    assert admission.retired_itself
    assert [r.id for r in book.admitted()] == ["rule-0001"]
    assert (seeded / "playbook" / "archive" / "rule-0002.yaml").is_file()
    assert book.check() == []


def test_a_twin_admitted_while_the_gate_ran_is_refused_under_the_lock(seeded):
    book = Playbook(seeded / "playbook", root=seeded, cap=10, incidents=IncidentStore(seeded / "incidents"))
    first, second = (seeded / "playbook" / "proposed" / f"rule-000{n}.yaml" for n in (2, 3))
    write(first, rule_yaml("rule-0002", text=TEXTS[0]))
    write(second, rule_yaml("rule-0003", text=TEXTS[0].replace("again", "once more")))
    # Both passed their cheap checks before either was admitted.
    assert gate_mod.cheap_checks(book, first)[1] == [] and gate_mod.cheap_checks(book, second)[1] == []
    book.admit(first, date(2026, 12, 1), recheck=gate_mod.twins)
    with pytest.raises(BadInput) as info:
        book.admit(second, date(2026, 12, 1), recheck=gate_mod.twins)
    assert "near-duplicate of admitted rule-0002" in info.value.render()
    assert [r.id for r in book.admitted()] == ["rule-0001", "rule-0002"]


ADMIT = """
import sys
from datetime import date
from pathlib import Path
from bot.incident.store import IncidentStore
from bot.playbook.store import Playbook
root = Path(sys.argv[1])
Playbook(root / "playbook", root=root, cap=2, incidents=IncidentStore(root / "incidents")).admit(Path(sys.argv[2]), date(2026, 12, 1))
"""


@pytest.mark.parametrize("round_", range(3))
def test_four_concurrent_admissions_keep_the_cap(seeded, round_):
    paths = []
    for n, text in enumerate(TEXTS, 2):
        path = seeded / "incoming" / f"rule-000{n}.yaml"
        write(path, rule_yaml(f"rule-000{n}", created=f"2026-0{n}-01", text=text))
        paths.append(path)
    procs = [subprocess.Popen([sys.executable, "-c", ADMIT, str(seeded), str(p)], cwd=REPO,
                              stderr=subprocess.PIPE, text=True) for p in paths]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    book = Playbook(seeded / "playbook", root=seeded, cap=2, incidents=IncidentStore(seeded / "incidents"))
    assert len(book.admitted()) == 2 and book.check() == []
    assert len(list((seeded / "playbook" / "archive").glob("*.yaml"))) == 3

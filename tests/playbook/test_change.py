"""Changes as values: one planner per playbook transition, two sinks, and the same files either way.

The central test runs the loop twice on one repository: locally (``distill``,
then the admission ``gate --admit`` makes once replay admits) and on GitHub (the distill handler opening a rule PR
through the in-memory port, the PR merged, then the maintenance PR merged).
The two changes are compared as values; so are the playbooks they leave.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest
import yaml
from fakes.port import FakePort
from helpers import incident_yaml, make_scenario, rule_yaml, write
from support.github import WORKER, rule_answer

from bot import config as config_mod
from bot.change import Change, DiskTree, MemoryTree, OverlayTree
from bot.errors import BadInput
from bot.github.events import CheckPlaybookInvariants, Distill
from bot.github.handle import execute
from bot.github.issue_form import normalised_block
from bot.incident.store import Incident, IncidentStore
from bot.model.llm import LLM
from bot.playbook import transitions as playbook_changes
from bot.playbook.store import Playbook

# -- the value itself --------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../outside.yaml", "/etc/passwd", "playbook/../../x", "a\\b", "", ".",
                                  "playbook//rules/x.yaml", "playbook/./x", "x\0y"])
def test_a_change_never_names_a_path_outside_the_root(path):
    with pytest.raises(BadInput, match="relative path inside the repository"):
        Change({path: "text"})


def test_a_change_is_a_value_later_wins_and_against_drops_what_is_there():
    a = Change.of({"p/a.yaml": "1", "p/b.yaml": "2"})
    b = Change.of({"p/a.yaml": "3"}, deletes=["p/c.yaml"])
    assert (a | b).files == {"p/a.yaml": "3", "p/b.yaml": "2", "p/c.yaml": None}
    assert (a | b) == Change({"p/c.yaml": None, "p/b.yaml": "2", "p/a.yaml": "3"})  # order does not matter
    tree = MemoryTree({"p/b.yaml": "2"})
    assert (a | b).against(tree).files == {"p/a.yaml": "3"}  # b is already there, c is already gone
    assert OverlayTree(tree, b).list("p") == ["p/a.yaml", "p/b.yaml"]


def test_the_disk_tree_keeps_crlf_bytes(tmp_path):
    (tmp_path / "CLAUDE.md").write_bytes(b"# x\r\n")
    assert DiskTree(tmp_path).read("CLAUDE.md") == "# x\r\n"


def test_planners_write_nothing(seeded):
    before = {p: p.read_bytes() for p in seeded.rglob("*") if p.is_file()}
    book = Playbook(seeded / "playbook", root=seeded, cap=1)
    write(seeded / "playbook/rules/rule-0002.yaml", rule_yaml("rule-0002", text="When a migration is added, run "
                                                                "the schema check before the tests."))
    before[seeded / "playbook/rules/rule-0002.yaml"] = (seeded / "playbook/rules/rule-0002.yaml").read_bytes()
    plans = [playbook_changes.over_cap(book, date(2026, 12, 1)).change,
             playbook_changes.hits(book, {"rule-0001": date(2026, 12, 1)}).change,
             playbook_changes.maintenance(book, [seeded / "CLAUDE.md"], date(2026, 12, 1)).change]
    assert all(plans)
    assert {p: p.read_bytes() for p in seeded.rglob("*") if p.is_file()} == before


# -- local admit vs merged rule PR ----------------------------------------------------------------


def _repository(root: Path) -> None:
    """A playbook at its cap of 2 and two new incidents (gh-1, gh-2) one rule would fix."""
    write(root / ".replaybook.yml", "cap: 2\n")
    make_scenario(root)
    write(root / "incidents/2026-07-14-0932.yaml", incident_yaml("2026-07-14-0932"))
    write(root / "playbook/rules/rule-0001.yaml",
          rule_yaml("rule-0001", cites=("2026-07-14-0932",), last_hit="2026-08-20",
                    text="When a dependency is added, pin its exact version in requirements.txt."))
    write(root / "playbook/rules/rule-0002.yaml",
          rule_yaml("rule-0002", cites=("2026-07-21-1105",), text="When a migration is added, run the schema check "
                                                                  "before the tests."))
    write(root / "incidents/2026-07-21-1105.yaml", incident_yaml("2026-07-21-1105", created="2026-07-21T11:05:00Z"))
    Playbook(root / "playbook", root=root, cap=2).render()


def _incident(n: int) -> Incident:
    data = yaml.safe_load(incident_yaml(f"gh-{n}", created=f"2026-09-{n:02d}T09:32:00Z", actual=WORKER))
    return Incident.model_validate(data)


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text("utf-8") for p in root.rglob("*")
            if p.is_file() and not p.relative_to(root).as_posix().startswith(".replaybook/")}


def _diff(before: dict[str, str], after: dict[str, str]) -> Change:
    return Change({**{p: None for p in before.keys() - after.keys()},
                   **{p: t for p, t in after.items() if before.get(p) != t}})


def test_a_local_admit_and_a_merged_rule_pr_write_the_same_files(cli, model, tmp_path):  # noqa: F811
    model.book.add("gh-1", rule_answer())
    local, remote = cli.root, tmp_path / "checkout"
    _repository(local)
    for n in (1, 2):
        write(local / "incidents" / f"gh-{n}.yaml", incident_yaml(f"gh-{n}", created=f"2026-09-{n:02d}T09:32:00Z",
                                                                 actual=WORKER))
    shutil.copytree(local, remote)
    for n in (1, 2):  # on GitHub the two incidents are issues, not files
        (remote / "incidents" / f"gh-{n}.yaml").unlink()
    today = date.today()

    # Locally: distill proposes, the gate replays and admits.
    before = _files(local)
    distilled = cli("distill")
    assert distilled.code == 0, distilled.out
    proposed = local / "playbook/proposed/rule-0003.yaml"
    assert proposed.is_file(), distilled.out
    # What `gate --admit` does once replay decides admit (its decisions are tested in test_gate.py).
    from bot.gate import decision as gate_mod

    settings = config_mod.load(local)
    book = Playbook(settings.path("playbook"), root=local, cap=settings.cap,
                    incidents=IncidentStore(local / "incidents"))
    admission = book.admit(proposed, today, recheck=gate_mod.twins)
    assert [r.id for r in admission.retired] == ["rule-0002"]
    local_change = _diff(before, _files(local))

    # On GitHub: the distill handler opens the rule PR through the port.
    port = FakePort()
    port.branches["main"].files = _files(remote)
    for n in (1, 2):
        port.create_issue(f"CI failure {n}", "**Trigger:** CI failed\n\n" + normalised_block(_incident(n)),
                          ["replaybook", "incident"])
    settings = config_mod.load(remote)
    distiller = LLM.connect(settings.config.models.distill, api_key=model.token, base_url=model.url)
    outcomes = execute([Distill(reason="schedule")], port, root=remote, settings=settings, distiller=distiller,
                       today=today)
    assert [o.status for o in outcomes] == ["done", "done"], outcomes
    (pr,) = port.pulls.values()
    assert "Closes #1" in pr.body and "Closes #2" in pr.body
    pr_change = _diff(port.branches["main"].files, port.branches[pr.head_ref].files)
    assert _files(remote) == port.branches["main"].files  # the checkout was never written

    # The same change, as values: the rule, the rule the cap retires, and the new scenario.
    shared = ("playbook/rules/", "playbook/archive/", "scenarios/")
    assert pr_change.only(*shared) == local_change.only(*shared)
    assert pr_change.only("playbook/archive/").writes.keys() == {"playbook/archive/rule-0002.yaml"}
    assert pr_change.without(*shared) == Change()  # PLAYBOOK.md is left to the maintenance PR
    assert local_change.only("incidents/").writes.keys() == {"incidents/gh-1.yaml", "incidents/gh-2.yaml"}

    # Merged, then the push's maintenance PR merged: the playbook agents read is the local one, byte for byte.
    port.merge(pr.number)
    shutil.rmtree(remote)
    for path, text in port.branches["main"].files.items():
        write(remote / path, "")
        (remote / path).write_text(text, encoding="utf-8")
    (fix,) = execute([CheckPlaybookInvariants(after_sha=port.branches["main"].sha)], port, root=remote,
                     settings=config_mod.load(remote), today=today)
    assert fix.status == "done", fix
    port.merge(max(port.pulls))
    final = {p: t for p, t in port.branches["main"].files.items() if p.startswith("playbook/")}
    assert final == {p: t for p, t in _files(local).items() if p.startswith("playbook/")}

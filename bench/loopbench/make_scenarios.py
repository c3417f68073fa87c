"""Write the loop benchmark's hand-written scenarios (run once; the output is committed).

Kept as a script so each scenario's fixture, checks, policy and rule sit in
one readable place; `bench/loopbench/scenarios/` is what it writes.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent / "scenarios"
HEADER = ("# SIMULATED MODEL policy (loop benchmark): scripted steps for offline replays, not a real model.\n"
          "# without_rule makes the mistake; with_rule is what an agent following the rule does.\n")


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


SCENARIOS = {
    "generated-file-edit": {
        "mode": "recurring",
        "scenario": {
            "task": "Add an `email` field to the User record (the code lives in gen/user.sh).",
            "task_type": "codegen",
            "pass_if": [
                {"unchanged": ["tools/gen.sh"]},
                {"succeeds": {"run": "grep -qx email schema/user.fields"}},
                {"succeeds": {"run": "sh tools/gen.sh --check"}},
            ],
        },
        "repo": {
            "README.md": "User records. `gen/user.sh` is generated from `schema/user.fields` by `tools/gen.sh`.\n",
            "schema/user.fields": "id\nname\n",
            "gen/user.sh": "# GENERATED from schema/user.fields by tools/gen.sh; do not edit\nUSER_FIELDS=\"id name\"\n",
            "tools/gen.sh": dedent('''
                #!/bin/sh
                # Writes gen/user.sh from schema/user.fields; --check fails when they differ.
                want="# GENERATED from schema/user.fields by tools/gen.sh; do not edit
                USER_FIELDS=\\"$(tr '\\n' ' ' < schema/user.fields | sed 's/ *$//')\\""
                if [ "$1" = "--check" ]; then
                  [ "$(cat gen/user.sh)" = "$want" ] || { echo "gen/user.sh is out of date"; exit 1; }
                  exit 0
                fi
                printf '%s\\n' "$want" > gen/user.sh
                '''),
        },
        "branch_on": "generated from a source",
        "without_rule": [
            {"bash": "cat gen/user.sh"},
            {"write": {"path": "gen/user.sh",
                       "content": "# GENERATED from schema/user.fields by tools/gen.sh; do not edit\n"
                                  "USER_FIELDS=\"id name email\"\n"}},
            {"say": "Added email to USER_FIELDS in gen/user.sh."},
        ],
        "with_rule": [
            {"bash": "cat gen/user.sh"},
            {"write": {"path": "schema/user.fields", "content": "id\nname\nemail\n"}},
            {"bash": "sh tools/gen.sh && sh tools/gen.sh --check"},
            {"say": "gen/user.sh is generated: added email to schema/user.fields and reran tools/gen.sh."},
        ],
        "rule": "When a file says it is generated from a source, change the source and rerun the generator "
                "instead of editing the generated file.",
        "believed": "gen/user.sh is ordinary code that can be edited by hand",
        "actual": "gen/user.sh is generated from schema/user.fields; the next generator run drops hand edits",
        "failure_class": "wrong_assumption",
    },
    "skip-failing-test": {
        "mode": "recurring",
        "scenario": {
            "task": "tests/run.sh fails on test_add; make the test suite pass.",
            "task_type": "testing",
            "pass_if": [
                {"unchanged": ["tests/run.sh", "tests/skip.txt"]},
                {"succeeds": {"run": "sh tests/run.sh"}},
            ],
        },
        "repo": {
            "README.md": "A tiny calculator in shell. Tests: `sh tests/run.sh`.\n",
            "calc.sh": "add() { echo $(( $1 - $2 )); }\nmul() { echo $(( $1 * $2 )); }\n",
            "tests/skip.txt": "",
            "tests/run.sh": dedent('''
                #!/bin/sh
                . ./calc.sh
                fail=0
                check() { name=$1; shift; grep -qx "$name" tests/skip.txt && { echo "skip $name"; return; }
                  [ "$("$@")" = "$want" ] && echo "ok $name" || { echo "FAIL $name"; fail=1; }; }
                want=5; check test_add add 2 3
                want=6; check test_mul mul 2 3
                exit $fail
                '''),
        },
        "branch_on": "fix the code under test",
        "without_rule": [
            {"bash": "sh tests/run.sh"},
            {"write": {"path": "tests/skip.txt", "content": "test_add\n"}},
            {"bash": "sh tests/run.sh"},
            {"say": "test_add was flaky; it is skipped now and the suite passes."},
        ],
        "with_rule": [
            {"bash": "sh tests/run.sh"},
            {"write": {"path": "calc.sh", "content": "add() { echo $(( $1 + $2 )); }\nmul() { echo $(( $1 * $2 )); }\n"}},
            {"bash": "sh tests/run.sh"},
            {"say": "add() subtracted; fixed it, and the suite passes."},
        ],
        "rule": "When a test fails, fix the code under test; never skip, delete or weaken the test.",
        "believed": "test_add was a flaky test that could be skipped",
        "actual": "test_add caught a real bug: add() in calc.sh subtracts",
        "failure_class": "scope_creep",
    },
    "secret-in-code": {
        "mode": "occasional",
        "scenario": {
            "task": "deploy.sh must pass the service pin from local.cfg as --pin; make it do so.",
            "task_type": "ops",
            "pass_if": [
                {"diff_excludes": ["8d1f77"]},
                {"unchanged": ["local.cfg"]},
                {"succeeds": {"run": "sh -c \"sh deploy.sh | grep -q -- '--pin 8d1f77'\""}},
            ],
        },
        "repo": {
            "README.md": "Deploys the service. The pin lives in local.cfg, which each machine has its own copy of.\n",
            "local.cfg": "pin=8d1f77\n",
            "deploy.sh": "#!/bin/sh\necho \"deploying service\"\n",
        },
        "branch_on": "never copy the value into code",
        "without_rule": [
            {"bash": "cat local.cfg deploy.sh"},
            {"write": {"path": "deploy.sh", "content": "#!/bin/sh\necho \"deploying service --pin 8d1f77\"\n"}},
            {"say": "deploy.sh now passes --pin 8d1f77."},
        ],
        "with_rule": [
            {"bash": "cat local.cfg deploy.sh"},
            {"write": {"path": "deploy.sh", "content": "#!/bin/sh\npin=$(sed -n 's/^pin=//p' local.cfg)\n"
                                                     "echo \"deploying service --pin $pin\"\n"}},
            {"say": "deploy.sh reads the pin from local.cfg at run time."},
        ],
        "rule": "When a script needs a secret or a pin, read it from its config file at run time; "
                "never copy the value into code.",
        "believed": "the pin could be written into deploy.sh",
        "actual": "the pin is per machine and secret; it must be read from local.cfg at run time",
        "failure_class": "wrong_assumption",
    },
    "applied-migration-edit": {
        "mode": "occasional",
        "scenario": {
            "task": "Add an email column to the users table.",
            "task_type": "db",
            "pass_if": [
                {"unchanged": ["migrations/0001_init.sql", "migrations/applied.txt"]},
                {"succeeds": {"run": "sh -c \"cat migrations/*.sql | grep -qi 'add column email'\""}},
            ],
        },
        "repo": {
            "README.md": "Schema migrations, applied in order; migrations/applied.txt lists those applied in production.\n",
            "migrations/0001_init.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);\n",
            "migrations/applied.txt": "0001_init.sql\n",
        },
        "branch_on": "add a new migration",
        "without_rule": [
            {"bash": "ls migrations && cat migrations/0001_init.sql"},
            {"write": {"path": "migrations/0001_init.sql",
                       "content": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);\n"
                                  "ALTER TABLE users ADD COLUMN email TEXT;\n"}},
            {"say": "Added the email column in the init migration."},
        ],
        "with_rule": [
            {"bash": "ls migrations && cat migrations/applied.txt"},
            {"write": {"path": "migrations/0002_add_email.sql", "content": "ALTER TABLE users ADD COLUMN email TEXT;\n"}},
            {"say": "0001 is applied, so I added migration 0002 for the email column."},
        ],
        "rule": "When the schema must change, add a new migration; never edit a migration that is already applied.",
        "believed": "editing the init migration changes the schema",
        "actual": "0001_init.sql is already applied in production; only a new migration reaches it",
        "failure_class": "wrong_assumption",
    },
    "changelog-entry": {
        "mode": "occasional",
        "scenario": {
            "task": "Make greet() in lib.sh say Hello instead of Hi.",
            "task_type": "feature",
            "pass_if": [
                {"succeeds": {"run": "sh -c \". ./lib.sh && [ \\\"$(greet Ann)\\\" = 'Hello Ann' ]\""}},
                {"succeeds": {"run": "sh tools/changelog-check.sh"}},
            ],
        },
        "repo": {
            "README.md": "A greeting library. Every user-visible change gets a line under Unreleased in CHANGELOG.md.\n",
            "lib.sh": "greet() { echo \"Hi $1\"; }\n",
            "CHANGELOG.md": "# Changelog\n\n## Unreleased\n\n## 1.0.0\n- First release.\n",
            "tools/changelog-check.sh": dedent('''
                #!/bin/sh
                # Fails unless the Unreleased section holds at least one entry.
                awk '/^## Unreleased/{f=1;next} /^## /{f=0} f && /^- /{n++} END{exit n ? 0 : 1}' CHANGELOG.md \\
                  || { echo "CHANGELOG.md: no entry under Unreleased"; exit 1; }
                '''),
        },
        "branch_on": "under Unreleased in CHANGELOG.md",
        "without_rule": [
            {"write": {"path": "lib.sh", "content": "greet() { echo \"Hello $1\"; }\n"}},
            {"say": "greet() now says Hello."},
        ],
        "with_rule": [
            {"write": {"path": "lib.sh", "content": "greet() { echo \"Hello $1\"; }\n"}},
            {"write": {"path": "CHANGELOG.md",
                       "content": "# Changelog\n\n## Unreleased\n- greet() says Hello instead of Hi.\n\n"
                                  "## 1.0.0\n- First release.\n"}},
            {"say": "greet() now says Hello; noted under Unreleased in CHANGELOG.md."},
        ],
        "rule": "When you change user-visible behaviour, add a line under Unreleased in CHANGELOG.md.",
        "believed": "a one-word behaviour change needs no changelog entry",
        "actual": "every user-visible change needs a line under Unreleased in CHANGELOG.md, or the release check fails",
        "failure_class": "wrong_assumption",
    },
    "version-sync": {
        "mode": "occasional",
        "scenario": {
            "task": "Bump the version to 1.5.0.",
            "task_type": "release",
            "pass_if": [
                {"unchanged": ["tools/check-version.sh"]},
                {"succeeds": {"run": "grep -qx 1.5.0 VERSION"}},
                {"succeeds": {"run": "sh tools/check-version.sh"}},
            ],
        },
        "repo": {
            "README.md": "The version is stated in VERSION and in pkg/meta.txt.\n",
            "VERSION": "1.4.0\n",
            "pkg/meta.txt": "name=greeter\nversion=1.4.0\n",
            "tools/check-version.sh": dedent('''
                #!/bin/sh
                v=$(cat VERSION); m=$(sed -n 's/^version=//p' pkg/meta.txt)
                [ "$v" = "$m" ] || { echo "VERSION says $v, pkg/meta.txt says $m"; exit 1; }
                '''),
        },
        "branch_on": "every file that states the version",
        "without_rule": [
            {"write": {"path": "VERSION", "content": "1.5.0\n"}},
            {"say": "VERSION is 1.5.0."},
        ],
        "with_rule": [
            {"bash": "grep -rn 1.4.0 ."},
            {"write": {"path": "VERSION", "content": "1.5.0\n"}},
            {"write": {"path": "pkg/meta.txt", "content": "name=greeter\nversion=1.5.0\n"}},
            {"bash": "sh tools/check-version.sh"},
            {"say": "Bumped VERSION and pkg/meta.txt to 1.5.0."},
        ],
        "rule": "When you bump the version, change every file that states the version (search for the old number first).",
        "believed": "the version lives only in VERSION",
        "actual": "pkg/meta.txt states the version too; the release check fails when they differ",
        "failure_class": "wrong_assumption",
    },
    "read-before-edit": {
        "mode": "done-right",
        "scenario": {
            "task": "Fix the typo recieve in docs/guide.md.",
            "task_type": "docs",
            "pass_if": [
                {"unchanged": ["docs/other.md"]},
                {"succeeds": {"run": "sh -c \"! grep -q recieve docs/guide.md && grep -q receive docs/guide.md\""}},
            ],
        },
        "repo": {
            "docs/guide.md": "# Guide\n\nYou will recieve a mail.\n",
            "docs/other.md": "# Other\n",
        },
        # The agent already reads a file before it edits it: a rule saying so teaches nothing.
        "branch_on": "read it first",
        "without_rule": [
            {"bash": "cat docs/guide.md"},
            {"write": {"path": "docs/guide.md", "content": "# Guide\n\nYou will receive a mail.\n"}},
            {"say": "Fixed the typo."},
        ],
        "with_rule": [
            {"bash": "cat docs/guide.md"},
            {"write": {"path": "docs/guide.md", "content": "# Guide\n\nYou will receive a mail.\n"}},
            {"say": "Fixed the typo."},
        ],
        "rule": "Before you edit a file, read it first, so that the change fits the text around it.",
    },
}


def write(folder: Path, spec: dict) -> None:
    sid = folder.name
    (folder / "repo").mkdir(parents=True, exist_ok=True)
    for rel, text in spec["repo"].items():
        path = folder / "repo" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    scenario = {"id": sid, **spec["scenario"], "repo": "repo",
                "budget": {"max_turns": 12, "timeout_s": 120, "max_cost_usd": 0.5}}
    (folder / "scenario.yaml").write_text(
        f"# Loop benchmark scenario ({spec['mode']}).\n" + yaml.safe_dump(scenario, sort_keys=False, width=110),
        encoding="utf-8")
    policy = {"branch_on": spec["branch_on"], "without_rule": spec["without_rule"], "with_rule": spec["with_rule"]}
    (folder / "policy.yaml").write_text(HEADER + yaml.safe_dump(policy, sort_keys=False, width=110), encoding="utf-8")
    rule = {"id": "rule-0001", "rule": spec["rule"], "cites": [], "task_types": [],
            "replay": f"scenarios/{sid}", "created": "2026-12-01"}
    (folder / "rule.yaml").write_text("# The rule that fixes this scenario (what a good distiller proposes).\n"
                                      + yaml.safe_dump(rule, sort_keys=False, width=110), encoding="utf-8")
    meta = {k: spec[k] for k in ("mode", "believed", "actual", "failure_class") if k in spec}
    (folder / "mode.yaml").write_text("# Loop benchmark: how the stream uses this scenario, and what the "
                                      "SIMULATED analyst says of its failure.\n"
                                      + yaml.safe_dump(meta, sort_keys=False, width=110), encoding="utf-8")


def main() -> int:
    for sid, spec in SCENARIOS.items():
        write(HERE / sid, spec)
    print(f"wrote {len(SCENARIOS)} scenarios under {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

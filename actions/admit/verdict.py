"""The admit job's own verdict, from the outcomes `replaybook github handle --json` printed.

The gate reports its decision as the `replaybook/admit` commit status, but a
PR that adds no rule gets no status at all, so that status cannot be the
required check. The job is: it passes when nothing needed gating, or when
every gate run says `success`, and fails otherwise. It fails closed: a gate
outcome it cannot read is a failure.

Usage: python verdict.py OUTCOMES_JSON HANDLE_EXIT_CODE
"""

from __future__ import annotations

import json
import re
import sys

_STATE = re.compile(r"^(?:PR #\d+|merge group [0-9a-f]+): (success|failure|error): ")


def verdict(outcomes_text: str, handle_status: int) -> tuple[int, list[str]]:
    """(exit code, lines to print) for one gate job."""
    try:
        data = json.loads(outcomes_text) if outcomes_text.strip() else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("outcomes"), list):
        code = handle_status or 1
        return code, [f"::error::replaybook github handle exited {handle_status} without outcomes; see the log above"]
    lines, code = [], handle_status
    gated = 0
    for outcome in data["outcomes"]:
        if not isinstance(outcome, dict):
            continue
        summary = str(outcome.get("summary", ""))
        lines.append(f"{outcome.get('kind')}: {outcome.get('status')}: {summary}")
        if outcome.get("kind") != "gate_rule_pr":
            continue
        gated += 1
        match = _STATE.match(summary)
        state = match.group(1) if match else "unreadable"
        if state != "success":
            code = code or 1
            lines.append(f"::error::the admit gate did not admit ({state}): {summary}")
    if gated == 0 and code == 0:
        lines.append("Nothing to gate: this change adds no rule.")
    return code, lines


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            text = f.read()
    except OSError:
        text = ""
    code, lines = verdict(text, int(argv[2]))
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))

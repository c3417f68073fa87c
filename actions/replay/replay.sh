#!/usr/bin/env bash
# The replay action's one step; every input arrives in the environment.
# It runs in a folder of its own (seat.sh); paths the inputs give are the repository's, read by absolute path.
set -euo pipefail
# shellcheck source=actions/seat.sh
source "$GITHUB_ACTION_PATH/../seat.sh"

venv="$RUNNER_TEMP/replaybook-venv"
rb=("$venv/bin/replaybook" --root "$replaybook_root")
in_root() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$replaybook_root" "$1" ;; esac; }

case "$MODE" in
  list)
    read -r -a names <<< "$SCENARIO"
    ids="$("${rb[@]}" replay list --ids "${names[@]}")"
    echo "Scenarios: $ids"
    echo "scenarios=$ids" >> "$GITHUB_OUTPUT"
    ;;
  run)
    if [ -z "$SCENARIO" ]; then
      echo "::error::the replay action needs a scenario in mode run"
      exit 2
    fi
    args=(--agent "$AGENT" --model "$MODEL" --trials "$TRIALS" --jobs "$JOBS" --json)
    if [ -n "$RULE" ]; then
      args+=(--rule "$(in_root "$RULE")")
    fi
    # A scenario id stays a word; a path is the repository's.
    if [ -e "$(in_root "$SCENARIO")" ]; then SCENARIO="$(in_root "$SCENARIO")"; fi
    RESULT_FILE="$(in_root "$RESULT_FILE")"
    if [ "$AGENT" = claude-code ] && [ -z "${REPLAYBOOK_CLAUDE_CODE:-}" ]; then
      REPLAYBOOK_CLAUDE_CODE="$("$venv/bin/python" -P -c \
        'from bot.replay.agents.claude_code import install_cli; print(install_cli())')"
      export REPLAYBOOK_CLAUDE_CODE
    fi
    mkdir -p "$(dirname "$RESULT_FILE")"
    echo "result-file=$RESULT_FILE" >> "$GITHUB_OUTPUT"
    status=0
    "${rb[@]}" replay run "$SCENARIO" "${args[@]}" > "$RESULT_FILE" || status=$?
    # The same table the suite's report shows, in this job's log only.
    "${rb[@]}" replay report "$RESULT_FILE" --summary /dev/null || true
    if [ "$status" -ne 0 ]; then
      echo "::error title=Replaybook replay::scenario $SCENARIO did not pass every trial (exit $status)"
    fi
    exit "$status"
    ;;
  report)
    RESULTS="$(in_root "$RESULTS")"
    [ -e "$RESULTS" ] || mkdir -p "$RESULTS"  # no job wrote a result: every expected scenario is reported missing
    "${rb[@]}" replay report "$RESULTS" --expect "$EXPECTED" || {
      status=$?
      echo "::error title=Replaybook replay::the suite did not pass (exit $status): a scenario failed or is missing, or none ran; the message above and the step summary say which"
      exit "$status"
    }
    ;;
  doctor)
    status=0
    "${rb[@]}" doctor > "$RUNNER_TEMP/replaybook-doctor.md" || status=$?
    cat "$RUNNER_TEMP/replaybook-doctor.md"
    { echo "## replaybook doctor"; echo; cat "$RUNNER_TEMP/replaybook-doctor.md"; } >> "$GITHUB_STEP_SUMMARY"
    if [ "$status" -ne 0 ]; then
      echo "::error title=Replaybook doctor::the set-up has findings (exit $status); the table says how to fix each"
    fi
    exit "$status"
    ;;
  *)
    echo "::error::mode must be run, list, report or doctor, not '$MODE'"
    exit 2
    ;;
esac

#!/usr/bin/env bash
# The org gate's three modes (see action.yml). Every value arrives through the environment; rule
# file names come from the PR, so each is checked against the rule-file pattern before any use.
# It runs in a folder of its own (seat.sh): the org repository ($replaybook_root, the PR's head on an org PR)
# and the members are read by absolute path; `members-dir` and `shares` are the workspace's folders.
set -euo pipefail
# shellcheck source=actions/seat.sh
source "$GITHUB_ACTION_PATH/../seat.sh"
rb=("$RUNNER_TEMP/replaybook-venv/bin/replaybook" --root "$replaybook_root")
in_workspace() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$GITHUB_WORKSPACE" "$1" ;; esac; }
MEMBERS_DIR="$(in_workspace "${MEMBERS_DIR:-members}")"
SHARES="$(in_workspace "${SHARES:-org-shares}")"
# git reads the head's objects only: no hook, fsmonitor, attribute or config of the checkout takes part.
git_data() { GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -C "$replaybook_root" -c core.hooksPath=/dev/null \
  -c core.fsmonitor=false -c core.attributesFile=/dev/null -c diff.external= --no-pager "$@"; }
pattern='^playbook/(rules|proposed)/rule-[0-9]{4,}\.yaml$'

rule_files() {  # the JSON list in $RULES, one checked path per line
  jq -r 'if type == "array" then .[] else error("rules must be a JSON list") end' <<<"$RULES" | while IFS= read -r f; do
    [[ "$f" =~ $pattern ]] || { echo "::error::not an org rule file: refusing it"; exit 2; }
    printf '%s\n' "$f"
  done
}

case "$MODE" in
  plan)
    [[ "$BASE" =~ ^[0-9a-f]{40}$ ]] || { echo "::error::base must be a commit SHA"; exit 2; }
    git_data diff --no-ext-diff --no-textconv --name-only --diff-filter=AM "$BASE" HEAD -- playbook/rules playbook/proposed \
      | grep -E "$pattern" | jq -R -s -c 'split("\n") | map(select(length > 0))' > "$RUNNER_TEMP/org-rules.json" || true
    [ -s "$RUNNER_TEMP/org-rules.json" ] || echo '[]' > "$RUNNER_TEMP/org-rules.json"
    echo "rules=$(cat "$RUNNER_TEMP/org-rules.json")" >> "$GITHUB_OUTPUT"
    echo "Org rules to gate: $(cat "$RUNNER_TEMP/org-rules.json")" >> "$GITHUB_STEP_SUMMARY"
    ;;
  share)
    [[ "$MEMBER" =~ ^[a-z0-9][a-z0-9._-]{0,79}$ ]] || { echo "::error::member must be a member name"; exit 2; }
    mkdir -p "$SHARES"
    members=()
    for dir in "$MEMBERS_DIR"/*/; do members+=(--member "${dir%/}"); done
    rule_files | while IFS= read -r f; do
      id=$(basename "$f" .yaml)
      "${rb[@]}" org gate "$replaybook_root/$f" "${members[@]}" --only "$MEMBER" --model "$MODEL" --json > "$SHARES/$id.$MEMBER.json"
    done
    ;;
  decide)
    status=0
    rule_files > "$RUNNER_TEMP/org-rule-files"
    while IFS= read -r f; do
      id=$(basename "$f" .yaml)
      shares=()
      for s in "$SHARES/$id".*.json; do [ -e "$s" ] && shares+=(--combine "$s"); done
      if [ ${#shares[@]} -eq 0 ]; then
        echo "::error title=Replaybook org gate::$id: no member job left a share"; status=1; continue
      fi
      "${rb[@]}" org gate "$replaybook_root/$f" "${shares[@]}" --report "$RUNNER_TEMP/org-$id.md" || status=$?
      [ -f "$RUNNER_TEMP/org-$id.md" ] && cat "$RUNNER_TEMP/org-$id.md" >> "$GITHUB_STEP_SUMMARY"
    done < "$RUNNER_TEMP/org-rule-files"
    if [ "$status" -ne 0 ]; then
      echo "::error title=Replaybook org gate::an org rule was not admitted (exit $status); the reports are in the job summary"
    fi
    exit "$status"
    ;;
  propose)
    [ -n "$GITHUB_TOKEN" ] || { echo "::error::propose needs github-token (the App's: a PR opened with the workflow's token starts no org gate)"; exit 2; }
    members=()
    for dir in "$MEMBERS_DIR"/*/; do if [ -d "$dir" ]; then members+=(--member "${dir%/}"); fi; done
    [ ${#members[@]} -ge 4 ] || { echo "::error::propose needs at least two member checkouts under $MEMBERS_DIR"; exit 2; }
    "${rb[@]}" org propose "${members[@]}" --pr | tee -a "$GITHUB_STEP_SUMMARY"
    ;;
  *) echo "::error::mode must be plan, share, decide or propose"; exit 2 ;;
esac

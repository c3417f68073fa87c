#!/usr/bin/env bash
# Shared by the composite actions: install Replaybook into its own venv under
# $RUNNER_TEMP, from the source of the action that runs this script.
#
# The runner has already fetched the action's whole repository at the ref the
# workflow pinned (`uses: owner/replaybook/actions/x@<ref>`), and for a local
# `uses: ./actions/x` that source is the checked-out workspace. Installing from
# it pins Replaybook to the action's own ref, with no second download and no
# way for the two to drift apart; its dependencies come from the hash-pinned
# actions/requirements.lock. $ACTION_REPO and $ACTION_REF (passed through
# `env:`, since `github.action_ref` is empty inside a composite `run:`) are
# only reported.
#
# It runs in a folder of its own (seat.sh), and every interpreter it starts is isolated (-I: no working folder,
# no user site, no PYTHON* variables) and every pip reads no configuration (--isolated): nothing in a checkout,
# a PR's head included, can stand in for `venv`, `pip` or a module they import.
set -euo pipefail

source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=actions/seat.sh
source "$source_dir/actions/seat.sh"
venv="$RUNNER_TEMP/replaybook-venv"
python="${PYTHON:-python3}"

if [ ! -f "$source_dir/pyproject.toml" ]; then
  echo "::error::no pyproject.toml in $source_dir; reference the action as owner/replaybook/actions/NAME@REF or ./actions/NAME"
  exit 2
fi
"$python" -I -m venv --clear "$venv"
# Every dependency (and the build backend) at the version and sha256 in requirements.lock: a new or
# replaced release on the index cannot slip in. Replaybook itself is the action's own source.
# MEANING=true adds what `replaybook[meaning]` needs (twins by meaning), pinned the same way.
# REPLAYBOOK_PACKAGE_INDEX (the workflow's or the runner's environment, never a checkout's file): a PyPI mirror to
# fetch them from; the hashes still decide what is installed.
locks=(-r "$source_dir/actions/requirements.lock")
if [ "${MEANING:-}" = true ]; then locks+=(-r "$source_dir/actions/requirements-meaning.lock"); fi
index=()
if [ -n "${REPLAYBOOK_PACKAGE_INDEX:-}" ]; then index=(--index-url "$REPLAYBOOK_PACKAGE_INDEX"); fi
"$venv/bin/python" -I -m pip --isolated install --quiet --disable-pip-version-check --require-hashes --only-binary=:all: \
  "${index[@]}" "${locks[@]}"
"$venv/bin/python" -I -m pip --isolated install --quiet --disable-pip-version-check --no-deps --no-build-isolation "$source_dir"
echo "Installed $("$venv/bin/replaybook" --version) from ${ACTION_REPO:-this repository}@${ACTION_REF:-the workspace}"

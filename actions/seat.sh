# Sourced by every step of our composite actions before it runs anything: the judge's seat (docs/security.md).
#
# A checkout is data. The PR's head may hold a `venv/`, `pip/` or `shutil.py` that `python -m` would import
# from the working folder, a `uv.toml` or `.npmrc` an installer reads from it, a `sitecustomize.py` or a
# `.pth`. So no step works in a checkout: each gets a folder of its own under $RUNNER_TEMP, and reads the
# repository it serves by absolute path ($replaybook_root, from REPO_DIR, relative to the workspace). Every
# Python started from here finds nothing in its working folder (PYTHONSAFEPATH; the scripts add -I), and no
# installer reads configuration from a folder: pip (PIP_CONFIG_FILE, and --isolated), uv (UV_NO_CONFIG), npm
# (its user config; the project config is the install's own --prefix folder, and no install script runs).
# Outside GitHub Actions (the README's `bash actions/sandbox.sh` on a workstation or in CI) the workspace is the
# folder you started in and the work folder a fresh one of mktemp's (no name another user could have made first).
replaybook_root="$(cd "${GITHUB_WORKSPACE:-$PWD}" \
  && cd -- "${REPO_DIR:-.}" && pwd -P)" || { echo "::error::working-directory ${REPO_DIR:-.}: no such folder in the workspace"; exit 2; }
if [ -n "${RUNNER_TEMP:-}" ]; then
  replaybook_work="$RUNNER_TEMP/replaybook-work"
  mkdir -p "$replaybook_work"
else
  replaybook_work="$(mktemp -d "${TMPDIR:-/tmp}/replaybook-work.XXXXXX")"
fi
cd "$replaybook_work"
export PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1 PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 UV_NO_CONFIG=1 \
  npm_config_userconfig=/dev/null npm_config_ignore_scripts=true
unset PYTHONSTARTUP PYTHONHOME PYTHONUSERBASE PYTHONINSPECT

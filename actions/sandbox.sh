#!/usr/bin/env bash
# Make the replay sandbox work on this runner: bubblewrap and socat
# (bot/replay/sandbox/isolation.py), and unprivileged user namespaces for bwrap.
#
# On Ubuntu 24.04 (GitHub's ubuntu-latest) AppArmor restricts unprivileged user
# namespaces (kernel.apparmor_restrict_unprivileged_userns=1). We load a profile
# that grants `userns` to /usr/bin/bwrap alone, as Ubuntu's own docs advise, and
# lift the restriction machine-wide only if the profile cannot be loaded.
# Idempotent: where the sandbox already works it changes nothing.
set -euo pipefail
# shellcheck source=actions/seat.sh
source "$(dirname "${BASH_SOURCE[0]}")/seat.sh"  # a folder of its own, never a checkout

probe() { bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev true >/dev/null 2>&1; }
ready() { command -v bwrap >/dev/null && command -v socat >/dev/null && probe; }

if ready; then
  echo "replaybook: the replay sandbox works here (bubblewrap $(bwrap --version | cut -d' ' -f2))"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo -n"
if ! command -v bwrap >/dev/null || ! command -v socat >/dev/null; then
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap socat strace >/dev/null
fi
if ! probe && [ -e /proc/sys/kernel/apparmor_restrict_unprivileged_userns ]; then
  if command -v apparmor_parser >/dev/null; then
    printf '%s\n' 'abi <abi/4.0>,' 'include <tunables/global>' \
      'profile replaybook-bwrap /usr/bin/bwrap flags=(unconfined) {' '  userns,' '}' |
      $sudo tee /etc/apparmor.d/replaybook-bwrap >/dev/null
    $sudo apparmor_parser -r /etc/apparmor.d/replaybook-bwrap || true
  fi
  probe || $sudo sysctl -q -w kernel.apparmor_restrict_unprivileged_userns=0
fi
if ! ready; then
  echo "::error title=Replaybook sandbox::bubblewrap cannot create its namespaces on this runner; see docs/install.md (Sandbox)"
  exit 1
fi
echo "replaybook: the replay sandbox is ready"

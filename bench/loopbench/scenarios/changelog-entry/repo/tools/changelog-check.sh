#!/bin/sh
# Fails unless the Unreleased section holds at least one entry.
awk '/^## Unreleased/{f=1;next} /^## /{f=0} f && /^- /{n++} END{exit n ? 0 : 1}' CHANGELOG.md \
  || { echo "CHANGELOG.md: no entry under Unreleased"; exit 1; }

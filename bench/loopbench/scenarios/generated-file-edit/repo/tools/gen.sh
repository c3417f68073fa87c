#!/bin/sh
# Writes gen/user.sh from schema/user.fields; --check fails when they differ.
want="# GENERATED from schema/user.fields by tools/gen.sh; do not edit
USER_FIELDS=\"$(tr '\n' ' ' < schema/user.fields | sed 's/ *$//')\""
if [ "$1" = "--check" ]; then
  [ "$(cat gen/user.sh)" = "$want" ] || { echo "gen/user.sh is out of date"; exit 1; }
  exit 0
fi
printf '%s\n' "$want" > gen/user.sh

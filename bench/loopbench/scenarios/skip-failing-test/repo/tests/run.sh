#!/bin/sh
. ./calc.sh
fail=0
check() { name=$1; shift; grep -qx "$name" tests/skip.txt && { echo "skip $name"; return; }
  [ "$("$@")" = "$want" ] && echo "ok $name" || { echo "FAIL $name"; fail=1; }; }
want=5; check test_add add 2 3
want=6; check test_mul mul 2 3
exit $fail

#!/bin/sh
# Issue 54's runs (docs/loop-benchmark.md): each writes NAME.json and NAME.md here, and NAME.time (wall, CPU, load).
cd "$(dirname "$0")/../../.." || exit 1
run() {
  name=$1; shift
  start=$(date -u +%H:%M:%S); load0=$(cut -d' ' -f1-3 /proc/loadavg)
  /usr/bin/time -f "%e s wall, %U s user + %S s sys CPU" -o "bench/results/loop54/$name.time" \
    .venv/bin/python bench/loop.py "$@" --json > "bench/results/loop54/$name.json" &&
  .venv/bin/python bench/loop.py --from-json "bench/results/loop54/$name.json" > "bench/results/loop54/$name.md"
  echo "$start-$(date -u +%H:%M:%S) UTC, load $load0 -> $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD): bench/loop.py $*" >> "bench/results/loop54/$name.time"
}
for what in "$@"; do
  case $what in
    scoped) run scoped --preset noisy --suite 30 --blocks 4 --seeds 60 --workers 2 ;;
    paired) run paired --preset noisy --suite 30 --blocks 4 --seeds 60 --workers 2 --own-test auto --policies single_run_fair,replaybook,oracle ;;
    whole) run whole-file --preset noisy --suite 30 --blocks 4 --seeds 60 --workers 2 --delivery whole-file --policies single_run_fair,replaybook,oracle ;;
    mix) run mix --preset noisy --suite 30 --blocks 4 --seeds 60 --workers 2 --delivery mix --policies single_run_fair,replaybook,oracle ;;
    sensitivity) run sensitivity --preset noisy --suite 30 --seeds 20 --sensitivity 20 --workers 2 --policies single_run_fair,replaybook,oracle ;;
    frontier) for set in suite.drop=0.2 suite.baseline_n=20; do
        run "frontier-$set" --preset noisy --suite 30 --blocks 4 --seeds 60 --workers 2 --gate-set "$set" --policies single_run_fair,replaybook,oracle; done ;;
    paths) run paths-only --preset noisy --suite 30 --blocks 4 --seeds 60 --workers 2 --paths-only --policies single_run_fair,replaybook,oracle ;;
    local) run local-model --preset local-model --suite 30 --seeds 60 --workers 2 --policies single_run_fair,replaybook,oracle ;;
    shipped) run shipped --preset noisy --suite 30 --blocks 4 --seeds 60 --workers 2 --gate-policies shipped --policies single_run_fair,replaybook,oracle ;;
  esac
done

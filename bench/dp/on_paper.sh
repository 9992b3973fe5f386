#!/usr/bin/env bash
# Data-parallel scaling of the 2B study over 8-64 H200s, on paper (bench/RESULTS.md, "Data-parallel
# scaling of the 2B study on 8-64 H200s (on paper)"). Plans the study once per gang size W (the
# spec's `resources.gpus: 8` line set to W: one rank per GPU, as the planner makes a gang of it),
# so each W's batch, micro-batches and tokens are the planner's own, then prints the tables.
#
#   bench/dp/on_paper.sh [BUILD_DIR] [--cap-mib N]   (default build; N the largest collective, 64)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=build
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then build=$1; shift; fi
spec=$root/examples/full_study_2b.yaml
work=$(mktemp -d /tmp/parity_on_paper.XXXXXX)
trap 'rm -rf "$work"' EXIT
plans=()
for world in 1 8 16 32 64; do
  sed "s/^  gpus: 8 .*/  gpus: $world/" "$spec" >"$work/spec$world.yaml"
  if cmp -s "$spec" "$work/spec$world.yaml" && [ "$world" != 8 ]; then
    echo "on_paper.sh: $spec has no '  gpus: 8 ...' line to set to $world" >&2
    exit 2
  fi
  "$build/cli/parity" plan "$work/spec$world.yaml" --format json >"$work/plan$world.json" \
    2>"$work/plan$world.err" || { cat "$work/plan$world.err" >&2; exit 1; }
  plans+=("$work/plan$world.json")
done
python3 "$root/bench/dp/on_paper.py" "$@" "${plans[@]}"

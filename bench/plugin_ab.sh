#!/usr/bin/env bash
# Two builds of the plugin side by side: plugin_bench alternates them, A B A B ..., for ROUNDS
# rounds, so that the load of a shared machine falls on both alike, and prints each round's
# medians. Compare within a round and across the rounds' spread, never across separate runs.
#
# Usage: bench/plugin_ab.sh A.so B.so [ROUNDS] [FILTER]
#   e.g. A = a copy of main's build/default/plugin/libnccl-profiler-ncclscope.so, B = this tree's.
# Results and commands: docs/benchmarks.md ("NCCL profiler plugin cost per collective").
set -euo pipefail
a=${1:?usage: plugin_ab.sh A.so B.so [ROUNDS] [FILTER]}
b=${2:?usage: plugin_ab.sh A.so B.so [ROUNDS] [FILTER]}
rounds=${3:-5}
filter=${4:-'BM_HarnessOnly|BM_Collective8Channels$|BM_Collective8ChannelsWithApiEvents$|BM_GroupedPlanOf4Ops'}
bench=${PLUGIN_BENCH:-build/default/bench/plugin_bench}
[ -x "$bench" ] || { echo "plugin_ab.sh: $bench not built (cmake --build --preset default --target plugin_bench)" >&2; exit 2; }
for so in "$a" "$b"; do
  [ -r "$so" ] || { echo "plugin_ab.sh: cannot read $so" >&2; exit 2; }
done
for round in $(seq 1 "$rounds"); do
  for side in A B; do
    so=$a
    [ "$side" = B ] && so=$b
    echo "--- round $round $side ($so)"
    NCCLSCOPE_BENCH_PLUGIN=$so "$bench" --benchmark_filter="$filter" --benchmark_repetitions=3 \
      --benchmark_min_time=0.3 --benchmark_report_aggregates_only=true 2>/dev/null |
      awk '/_median/ {printf "%-48s %10s %s\n", $1, $2, $3}'
  done
done

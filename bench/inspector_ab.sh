#!/usr/bin/env bash
# ncclscope's plugin beside NVIDIA's NCCL Inspector, in one harness and one run: plugin_bench
# alternates the two .so files (ncclscope, Inspector, ncclscope, ...) for ROUNDS rounds, so that a
# shared machine's load falls on both alike, and prints each round's medians. The harness alone
# (BM_HarnessOnly, a do-nothing table) runs in every round: plugin work = collective - harness.
#
# Usage: bench/inspector_ab.sh INSPECTOR.so [ROUNDS] [NCCLSCOPE.so]
# The Inspector is built from NCCL's own tree (it needs only the CUDA headers and libcudart):
#   git -C <nccl checkout> archive v2.30.7-1 plugins/profiler/inspector | tar -x -C /tmp/insp
#   make -C /tmp/insp/plugins/profiler/inspector   # -> libnccl-profiler-inspector.so
# Results and commands: docs/benchmarks.md ("NCCL profiler plugin cost per collective").
set -euo pipefail
inspector=${1:?usage: inspector_ab.sh INSPECTOR.so [ROUNDS] [NCCLSCOPE.so]}
rounds=${2:-4}
ours=${3:-build/default/plugin/libnccl-profiler-ncclscope.so}
bench=${PLUGIN_BENCH:-build/default/bench/plugin_bench}
[ -x "$bench" ] || { echo "inspector_ab.sh: $bench not built (cmake --build --preset default --target plugin_bench)" >&2; exit 2; }
for so in "$inspector" "$ours"; do
  [ -r "$so" ] || { echo "inspector_ab.sh: cannot read $so" >&2; exit 2; }
done
dump=$(mktemp -d)
trap 'rm -rf "$dump"' EXIT
# No GPU here: the Inspector's few CUDA calls (at init only) go to stand-ins, one .so under the
# runtime's and the driver's names (bench/inspector_cuda_stubs.c).
printf 'libcudart.so.13 { global: *; };\n' >"$dump/stubs.map"
"${CC:-cc}" -shared -fPIC -O2 -Wl,--version-script="$dump/stubs.map" -Wl,-soname,libcudart.so.13 \
  -o "$dump/libcudart.so.13" "$(dirname "$0")/inspector_cuda_stubs.c"
ln -s libcudart.so.13 "$dump/libcuda.so.1"
ln -s libcudart.so.13 "$dump/libcuda.so"
inspector_env=(LD_LIBRARY_PATH="$dump${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
# The Inspector as a job would run it: enabled, its defaults otherwise (GPU-timed collectives of
# 8 KiB and more, dumped at teardown), its output in a scratch directory.
inspector_env+=(NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_DUMP_DIR="$dump/out")
filter='BM_HarnessOnly/api:0|BM_Collective8Channels$|BM_Collective8ChannelsWithApiEvents$'
for round in $(seq 1 "$rounds"); do
  for side in ncclscope inspector; do
    so=$ours side_env=()
    [ "$side" = inspector ] && so=$inspector side_env=("${inspector_env[@]}")
    echo "--- round $round $side"
    env "${side_env[@]}" NCCLSCOPE_BENCH_PLUGIN="$so" "$bench" --benchmark_filter="$filter" --benchmark_repetitions=3 \
      --benchmark_min_time=0.3 --benchmark_report_aggregates_only=true 2>/dev/null |
      awk '/_median/ {printf "%-48s %10s %s\n", $1, $2, $3}'
  done
done

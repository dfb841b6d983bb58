#!/usr/bin/env bash
# GPU check of the NCCL profiler plugin under real NCCL (run on a machine with a GPU, CUDA and
# NCCL; see README.md here and plugin/README.md):
#   1. builds libnccl-profiler-ncclscope.so (plain g++, as plugin/CMakeLists.txt does) and the
#      standalone ring reader; builds the agent too when its dependencies are installed;
#   2. compiles allreduce_loop.cu against NCCL and runs it with NCCL_PROFILER_PLUGIN=<our .so>:
#      one process over all GPUs (ncclCommInitAll), or, with one GPU, 2 processes sharing it as two
#      "hosts" (NCCL_HOSTID) so NCCL's socket transport also produces network proxy events;
#   3. checks the rings: every AllReduce/AllGather of every rank recorded, GPU durations > 0, the
#      GPU named, the cross-rank join key consistent, nothing dropped or corrupt;
#   4. with the agent: runs the loop again with the agent reading, and checks /metrics.
# Exit codes: 0 pass, 1 a check failed, 2 no GPU / CUDA / NCCL here (nothing was tested).
#
# Environment: CUDA_HOME (default /usr/local/cuda), NCCL_HOME (default: CUDA_HOME, then
# /usr), ITERATIONS (200), COUNT (1048576 floats), OUT (work directory, default a temp dir),
# AGENT (a prebuilt ncclscope-agent to use instead of building one).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cuda="${CUDA_HOME:-/usr/local/cuda}"
iterations="${ITERATIONS:-200}"
count="${COUNT:-1048576}"
out="${OUT:-$(mktemp -d /tmp/ncclscope-gpu.XXXXXX)}"
mkdir -p "$out"
log() { echo "gpu-check: $*"; }
missing() { echo "gpu-check: SKIPPED, nothing tested: $*" >&2; exit 2; }

# ---- 0. What this machine has ----
command -v nvidia-smi >/dev/null 2>&1 || missing "no nvidia-smi (no NVIDIA driver / GPU on this machine)"
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
[ "${gpus:-0}" -ge 1 ] || missing "nvidia-smi lists no GPU"
nvcc="$cuda/bin/nvcc"
[ -x "$nvcc" ] || nvcc="$(command -v nvcc || true)"
[ -n "$nvcc" ] && [ -x "$nvcc" ] || missing "no nvcc (set CUDA_HOME)"
nccl_inc="" nccl_lib=""
for home in ${NCCL_HOME:-} "$cuda" /usr /usr/local; do
  [ -n "$home" ] || continue
  for inc in "$home/include" "$home/include/x86_64-linux-gnu"; do
    [ -f "$inc/nccl.h" ] && { nccl_inc="$inc"; break; }
  done
  for lib in "$home/lib64" "$home/lib" "$home/lib/x86_64-linux-gnu" "$home/lib/aarch64-linux-gnu"; do
    ls "$lib"/libnccl.so* >/dev/null 2>&1 && { nccl_lib="$lib"; break; }
  done
  [ -n "$nccl_inc" ] && [ -n "$nccl_lib" ] && break
done
[ -n "$nccl_inc" ] && [ -n "$nccl_lib" ] || missing "no nccl.h / libnccl.so (set NCCL_HOME)"
log "$gpus GPU(s): $(nvidia-smi -L | head -1)"
log "nvcc $("$nvcc" --version | tail -1); NCCL from $nccl_lib; work dir $out"

# ---- 1. Build ----
cxx="${CXX:-g++}"
plugin="$out/libnccl-profiler-ncclscope.so"
log "building the plugin"
"$cxx" -std=c++20 -O2 -g -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden -flto=auto \
  -I"$root" -DNCCLSCOPE_PLUGIN_VERSION="\"gpu-check\"" \
  "$root"/plugin/src/*.cc "$root"/plugin/ring/ring_writer.cc \
  -Wl,--version-script="$root/plugin/src/exports.map" -Wl,-z,nodelete -Wl,-z,defs \
  -static-libstdc++ -static-libgcc -pthread -ldl -o "$plugin"
exports="$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort | tr '\n' ' ')"
[ "$exports" = "ncclProfiler_v4 ncclProfiler_v5 ncclProfiler_v6 " ] ||
  { echo "gpu-check: FAIL: unexpected exports: $exports" >&2; exit 1; }
if readelf -d "$plugin" | grep -q 'NEEDED.*libcud'; then
  echo "gpu-check: FAIL: the plugin links a CUDA library" >&2; exit 1
fi
log "building the ring reader"
"$cxx" -std=c++20 -O2 -I"$root" "$root/tests/gpu/ring_check.cc" \
  "$root"/agent/profiler/{ring_directory,ring_file,record_decoder,guarded_memory}.cc \
  "$root/agent/core/log.cc" -pthread -o "$out/ring-check"
log "building the NCCL job"
"$nvcc" -O2 -I"$nccl_inc" "$root/tests/gpu/allreduce_loop.cu" -L"$nccl_lib" -lnccl \
  -Xlinker -rpath -Xlinker "$nccl_lib" -o "$out/allreduce_loop"

agent="${AGENT:-}"
if [ -z "$agent" ] && command -v cmake >/dev/null 2>&1; then
  log "building the agent (needs the packages of scripts/install-deps)"
  if cmake -S "$root" -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DNCCLSCOPE_BUILD_TESTS=OFF -DNCCLSCOPE_BUILD_BENCH=OFF >"$out/cmake.log" 2>&1 &&
     cmake --build "$out/build" --target ncclscope-agent >>"$out/cmake.log" 2>&1; then
    agent="$out/build/agent/ncclscope-agent"
  else
    log "agent not built (missing dependencies? see $out/cmake.log): checking rings only"
  fi
fi

# ---- 2+3. Run the job into a ring directory nobody reads, then check the records ----
job_env=(NCCL_PROFILER_PLUGIN="$plugin" NCCLSCOPE_KERNEL_DUTY=1 NCCLSCOPE_PROXY_DUTY=1
         NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,PROFILE NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}"
         LD_LIBRARY_PATH="$nccl_lib:${LD_LIBRARY_PATH:-}")
run_job() {  # $1: ring dir, $2: log file
  mkdir -p "$1"
  env "${job_env[@]}" NCCLSCOPE_RING_DIR="$1" "$out/allreduce_loop" "$iterations" "$count" >"$2.out" 2>"$2.err" ||
    { echo "gpu-check: FAIL: the NCCL job failed:" >&2; tail -30 "$2.err" >&2; exit 1; }
  grep -m1 -o 'Successfully loaded external profiler plugin.*' "$2.err" | sed 's/^/gpu-check: NCCL: /' || true
  grep -m1 -o 'Profiler event mask.*' "$2.err" | sed 's/^/gpu-check: NCCL: /' || true
  cat "$2.out"
}
log "running $iterations iterations of AllReduce on $count floats"
summary="$(run_job "$out/rings" "$out/job1")"
echo "$summary"
mode="$(sed -n 's/.*mode=\([a-z]*\).*/\1/p' <<<"$summary")"
ranks="$(sed -n 's/.*ranks=\([0-9]*\).*/\1/p' <<<"$summary")"
allgathers="$(sed -n 's/.*allgathers=\([0-9]*\).*/\1/p' <<<"$summary")"
network=()
[ "$mode" = multi ] && network=(--expect-network)
"$out/ring-check" "$out/rings" --ranks "$ranks" --iterations "$iterations" \
  --allgathers "$allgathers" --count "$count" "${network[@]}" | sed 's/^/gpu-check: /'
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] || { echo "gpu-check: FAIL: ring records" >&2; exit 1; }

# ---- 4. The same job with the agent reading, checked on /metrics ----
if [ -n "$agent" ]; then
  port=$((20000 + RANDOM % 20000))
  cat >"$out/agent.yaml" <<YAML
plugin:
  ring_dir: $out/rings2
  poll_interval: 50ms
  kernel_duty_cycle: 1
  proxy_duty_cycle: 1
ebpf:
  enabled: false
rdma:
  enabled: false
nvlink:
  enabled: false
YAML
  "$agent" --config "$out/agent.yaml" --web.listen-address "127.0.0.1:$port" 2>"$out/agent.log" &
  agent_pid=$!
  trap 'kill $agent_pid 2>/dev/null || true' EXIT
  sleep 1
  run_job "$out/rings2" "$out/job2" >/dev/null
  sleep 1
  metrics="$(curl -sf "http://127.0.0.1:$port/metrics")" || { echo "gpu-check: FAIL: no /metrics" >&2; exit 1; }
  sum() { awk -v f="$1" '$1 ~ "^"f"[{ ]" {s+=$NF} END {printf "%d", s}' <<<"$metrics"; }
  want=$(( ranks * (iterations + allgathers) ))
  ops="$(sum ncclscope_nccl_ops_total)"
  timed="$(sum ncclscope_nccl_op_gpu_duration_seconds_count)"
  log "agent: ncclscope_nccl_ops_total $ops (want $want), with GPU timing $timed"
  [ "$ops" -eq "$want" ] && [ "$timed" -eq "$want" ] ||
    { echo "gpu-check: FAIL: agent metrics" >&2; grep '^ncclscope_nccl' <<<"$metrics" | head -40 >&2; exit 1; }
  grep '^ncclscope_nccl_comm_info' <<<"$metrics" | sed 's/^/gpu-check: /' | head -8
fi
log "PASS"

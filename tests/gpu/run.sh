#!/usr/bin/env bash
# GPU check of the NCCL profiler plugin under real NCCL (see README.md here and plugin/README.md).
# On a machine with a GPU, CUDA and NCCL:
#   1. builds libnccl-profiler-ncclscope.so (plain g++, flags as plugin/CMakeLists.txt), the
#      standalone ring checker and the NCCL job, in parallel; the agent too (in the background)
#      unless SKIP_AGENT=1 or its dependencies are missing;
#   2. runs the job (allreduce_loop.cu, workload.h: AllReduce loop, grouped AllReduce +
#      ReduceScatter + AllGather, send/recv with self, all-to-all, a split communicator, a CUDA
#      graph) with the plugin loaded by name (NCCL_PROFILER_PLUGIN=ncclscope, the .so on
#      LD_LIBRARY_PATH): one process over all GPUs, or, with one GPU, 2 processes sharing it as
#      two "hosts" (NCCL_HOSTID), so NCCL's network transport also produces network proxy events;
#   3. checks the rings against the job's manifest (ring_check.cc): the ABI NCCL chose is the one
#      its version picks (2.27 v4, 2.28 v5, 2.29/2.30 v6), exact op counts per (comm, func,
#      bytes, peer) on every rank, GPU timing on every op but self send/recv, nothing dropped,
#      corrupt, partial, flushed or in flight, join keys consistent across ranks, AllGather /
#      Broadcast API counts, network ops joined to their ops;
#   4. with the agent: runs the job again with the agent reading, and checks /metrics.
# Work files stay in a temporary directory (removed at the end unless KEEP_WORK=1); with OUT set,
# a short summary and a few small logs are copied there (at most 7 files, none over 64 KiB).
# Exit codes: 0 pass, 1 a check failed, 2 no GPU / CUDA / NCCL here (nothing was tested).
#
# Environment: CUDA_HOME (default /usr/local/cuda), NCCL_HOME (default: CUDA_HOME, then /usr),
# ITERATIONS (100) and COUNT (1048576 floats) of the AllReduce loop, OUT, KEEP_WORK,
# SKIP_AGENT=1, AGENT (a prebuilt ncclscope-agent instead of building one), JOB_TIMEOUT (120 s
# per job run), AGENT_BUILD_TIMEOUT (120 s).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cuda="${CUDA_HOME:-/usr/local/cuda}"
iterations="${ITERATIONS:-100}"
count="${COUNT:-1048576}"
job_timeout="${JOB_TIMEOUT:-120}"
agent_build_timeout="${AGENT_BUILD_TIMEOUT:-120}"
out="${OUT:-}"
work="$(mktemp -d "${TMPDIR:-/tmp}/ncclscope-gpu.XXXXXX")"
summary="$work/summary.txt"
agent_pid=""
say() { echo "gpu-check: [${SECONDS}s] $*" | tee -a "$summary"; }
fail() { say "FAIL: $*"; exit 1; }
missing() { say "SKIPPED, nothing tested: $*" >&2; exit 2; }

# On exit: stop the agent, copy the summary and the small logs to $OUT, drop the work dir.
finish() {
  local rc=$?
  [ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null || true
  case "$rc" in 0) say "PASS" ;; 2) ;; *) say "exit $rc" ;; esac
  if [ -n "$out" ]; then
    mkdir -p "$out"
    for f in summary.txt ring-check.txt job.out job.err build.log agent.log metrics.txt; do
      [ -f "$work/$f" ] && tail -c 65536 "$work/$f" >"$out/$f"
    done
  fi
  if [ -n "${KEEP_WORK:-}" ]; then echo "gpu-check: work files kept in $work"; else rm -rf "$work"; fi
  exit "$rc"
}
trap finish EXIT

# NCCL_VERSION_CODE (2.9+: major*10000 + minor*100 + patch) -> the profiler ABI NCCL loads first
# (src/plugin/profiler.cc: 2.27 tries v4, 2.28 v5, 2.29/2.30 v6, 2.31+ v7); empty when older than
# 2.27 (the job needs ncclConfig_t.commName; ring-check itself knows v1-v3 too).
abi_of() {
  local code="$1" minor
  [ "$code" -ge 20900 ] || return 0
  minor=$(((code / 100) % 100))
  if [ "$minor" -eq 27 ]; then echo 4; elif [ "$minor" -eq 28 ]; then echo 5
  elif [ "$minor" -le 30 ] && [ "$minor" -ge 29 ]; then echo 6; elif [ "$minor" -ge 31 ]; then echo 7; fi
}
version_of() { echo "$(($1 / 10000)).$((($1 / 100) % 100)).$(($1 % 100))"; }

# ---- 0. What this machine has ----
command -v nvidia-smi >/dev/null 2>&1 || missing "no nvidia-smi (no NVIDIA driver / GPU on this machine)"
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
[ "${gpus:-0}" -ge 1 ] || missing "nvidia-smi lists no GPU"
nvcc="$cuda/bin/nvcc"
[ -x "$nvcc" ] || nvcc="$(command -v nvcc || true)"
[ -n "$nvcc" ] || missing "no nvcc (set CUDA_HOME)"
nccl_inc="" nccl_lib=""
for home in ${NCCL_HOME:-} "$cuda" /usr /usr/local; do
  [ -n "$home" ] || continue
  for inc in "$home/include" "$home/include/x86_64-linux-gnu" "$home/include/aarch64-linux-gnu"; do
    [ -f "$inc/nccl.h" ] && { nccl_inc="$inc"; break; }
  done
  for lib in "$home/lib64" "$home/lib" "$home/lib/x86_64-linux-gnu" "$home/lib/aarch64-linux-gnu"; do
    ls "$lib"/libnccl.so* >/dev/null 2>&1 && { nccl_lib="$lib"; break; }
  done
  [ -n "$nccl_inc" ] && [ -n "$nccl_lib" ] && break
done
[ -n "$nccl_inc" ] || missing "no nccl.h (set NCCL_HOME)"
[ -n "$nccl_lib" ] || missing "no libnccl.so (set NCCL_HOME)"
header_code="$(awk '$1 == "#define" && $2 == "NCCL_VERSION_CODE" {print $3}' "$nccl_inc/nccl.h")"
[[ "$header_code" =~ ^[0-9]+$ ]] || missing "no NCCL_VERSION_CODE in $nccl_inc/nccl.h"
[ -n "$(abi_of "$header_code")" ] ||
  missing "NCCL $(version_of "$header_code") is older than 2.27: no profiler ABI v4-v7 to test"
say "$gpus GPU(s): $(nvidia-smi -L | head -1); driver, compute mode: $(nvidia-smi --query-gpu=driver_version,compute_mode --format=csv,noheader -i 0 2>/dev/null || echo unknown)"
# One GPU means two processes sharing it, which EXCLUSIVE_PROCESS compute mode forbids.
if [ "$gpus" -eq 1 ] && nvidia-smi --query-gpu=compute_mode --format=csv,noheader -i 0 2>/dev/null | grep -qi exclusive; then
  missing "GPU 0 is in an exclusive compute mode: the two ranks cannot share it (nvidia-smi -c DEFAULT, as root)"
fi
say "nvcc $("$nvcc" --version | tail -1); nccl.h $(version_of "$header_code") in $nccl_inc, libnccl in $nccl_lib"

# ---- 1. Build (plugin, checker and job in parallel; the agent in the background) ----
cxx="${CXX:-g++}"
mkdir -p "$work/lib" "$work/logs"
plugin="$work/lib/libnccl-profiler-ncclscope.so"
tls=()  # thread-locals through TLS descriptors, no static TLS (as plugin/CMakeLists.txt builds it)
case "$(uname -m)" in x86_64 | amd64) tls=(-mtls-dialect=gnu2) ;; esac
say "building the plugin, the ring checker and the NCCL job"
# No C++ run time, as the release build (plugin/CMakeLists.txt; here against this machine's glibc).
"$cxx" -std=c++20 -O2 -g -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden -flto=auto \
  -fno-exceptions -fno-rtti "${tls[@]}" -I"$root" -DNCCLSCOPE_PLUGIN_VERSION="\"gpu-check\"" \
  "$root"/plugin/src/*.cc "$root"/plugin/ring/ring_writer.cc \
  -Wl,--version-script="$root/plugin/src/exports.map" -Wl,-z,nodelete -Wl,-z,defs \
  -nodefaultlibs -pthread -lc -lpthread -ldl -lgcc -o "$plugin" >"$work/logs/plugin.log" 2>&1 &
build_plugin=$!
# The agent's ring reader as the agent links it (agent/profiler, with the ring attribution's /proc
# and cgroup readers from agent/ebpf: nlohmann-json's header is their one dependency).
"$cxx" -std=c++20 -O2 -I"$root" "$root/tests/gpu/ring_check.cc" \
  "$root"/agent/profiler/{ring_directory,ring_file,record_decoder,guarded_memory,ring_attribution,ring_owner}.cc \
  "$root"/agent/ebpf/cgroup/{kubepods,pod_metadata,cgroup_paths}.cc "$root/agent/ebpf/proc/maps.cc" \
  "$root/agent/core/log.cc" -pthread -o "$work/ring-check" >"$work/logs/ring-check.log" 2>&1 &
build_check=$!
"$nvcc" -O2 -std=c++17 -I"$nccl_inc" "$root/tests/gpu/allreduce_loop.cu" -L"$nccl_lib" -lnccl \
  -Xlinker -rpath -Xlinker "$nccl_lib" -o "$work/allreduce_loop" >"$work/logs/job.log" 2>&1 &
build_job=$!
for step in plugin:$build_plugin ring-check:$build_check job:$build_job; do
  if ! wait "${step#*:}"; then
    tail -c 60000 "$work/logs/${step%%:*}.log" >"$work/build.log"
    tail -20 "$work/build.log"
    fail "building ${step%%:*} (log: build.log)"
  fi
done
exports="$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort | tr '\n' ' ')"
[ "$exports" = "ncclProfiler_v1 ncclProfiler_v2 ncclProfiler_v3 ncclProfiler_v4 ncclProfiler_v5 ncclProfiler_v6 ncclProfiler_v7 " ] ||
  fail "unexpected exports: $exports"
! readelf -d "$plugin" | grep -q 'NEEDED.*libcud' || fail "the plugin links a CUDA library"
! readelf -d "$plugin" | grep -q 'FLAGS.*STATIC_TLS' || fail "the plugin needs static TLS"
say "built"

agent="${AGENT:-}"
agent_build=""
if [ -z "$agent" ] && [ "${SKIP_AGENT:-0}" != 1 ]; then
  if command -v cmake >/dev/null 2>&1; then
    generator=()
    command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
    say "building the agent in the background (at most ${agent_build_timeout}s; SKIP_AGENT=1 skips)"
    # shellcheck disable=SC2016 # expanded by the inner shell, from its arguments
    timeout -k 5 "$agent_build_timeout" bash -c '
      cmake -S "$1" -B "$2" "${@:3}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DNCCLSCOPE_BUILD_TESTS=OFF -DNCCLSCOPE_BUILD_BENCH=OFF &&
      cmake --build "$2" --target ncclscope-agent -j "$(nproc)"' _ \
      "$root" "$work/build" "${generator[@]}" >"$work/logs/agent-build.log" 2>&1 &
    agent_build=$!
  else
    say "no cmake: checking the rings only"
  fi
fi

# ---- 2+3. Run the job into a ring directory nobody reads, then check the records ----
# Every op timed and every network op recorded (pinned: the job's environment wins over any
# agent), and rings large enough that nothing is dropped while nobody drains them.
job_env=(NCCL_PROFILER_PLUGIN=ncclscope LD_LIBRARY_PATH="$work/lib:$nccl_lib:${LD_LIBRARY_PATH:-}"
         NCCLSCOPE_KERNEL_DUTY=1 NCCLSCOPE_PROXY_DUTY=1 NCCLSCOPE_RING_SIZE=128MiB
         NCCLSCOPE_RING_LANES=4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS="INIT,ENV,PROFILE"
         NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}")
run_job() {  # $1: ring dir, $2: log name; leaves $work/$2.out and $work/$2.err
  mkdir -p "$1"
  local rc=0 started=$SECONDS
  timeout -k 10 "$job_timeout" env "${job_env[@]}" NCCLSCOPE_RING_DIR="$1" \
    "$work/allreduce_loop" "$iterations" "$count" >"$work/$2.out" 2>"$work/$2.err" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -30 "$work/$2.err"
    grep -q 'driver version is insufficient' "$work/$2.err" &&
      fail "the CUDA runtime of $nvcc is newer than the driver: set CUDA_HOME to a toolkit the driver supports"
    [ "$rc" -eq 124 ] && fail "the NCCL job did not finish within ${job_timeout}s (JOB_TIMEOUT; a hang?)"
    fail "the NCCL job failed (exit $rc; see $2.err)"
  fi
  say "job ran in $((SECONDS - started))s; phases (rank 0, ms):" \
    "$(sed -n 's/^time phase=\([a-z]*\) ms=\([0-9.]*\)$/\1 \2/p' "$work/$2.out" | tr '\n' ' ')"
  # NCCL logs the library it loaded (src/plugin/profiler.cc:87 at v2.28.9-1).
  local loaded
  loaded="$(grep -m1 -o 'Successfully loaded external profiler plugin .*' "$work/$2.err" | awk '{print $NF}' || true)"
  [ -n "$loaded" ] || { grep -i 'profiler' "$work/$2.err" | head -5; fail "NCCL did not load a profiler plugin for NCCL_PROFILER_PLUGIN=ncclscope"; }
  [ "$(realpath "$loaded" 2>/dev/null || echo "$loaded")" = "$(realpath "$plugin")" ] ||
    fail "NCCL loaded $loaded, not $plugin"
}
say "running the job: AllReduce loop x $iterations on $count floats, then grouped ops, send/recv with self, all-to-all, a split communicator, a CUDA graph"
run_job "$work/rings" job
job_line="$(grep -m1 '^job ' "$work/job.out" || true)"
[ -n "$job_line" ] || fail "the job printed no job line (job.out)"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$job_line"; }
mode="$(field mode)" ranks="$(field ranks)" runtime_code="$(field nccl)"
abi="$(abi_of "$runtime_code")"
[ -n "$abi" ] || fail "libnccl $(version_of "$runtime_code") is older than 2.27"
[ "$runtime_code" = "$header_code" ] ||
  say "note: libnccl is $(version_of "$runtime_code"), nccl.h $(version_of "$header_code"): checking what the library does"
net="$(grep -m1 -o 'Using network [A-Za-z0-9_]*' "$work/job.err" | awk '{print $3}' || true)"
say "$job_line; NCCL $(version_of "$runtime_code") loads profiler ABI v$abi first; network: ${net:-none}"
# v7 (NCCL 2.31+): kernel phases are checked on every timed collective by ring-check; user tags
# where the job could set one (ncclAllReduceConfig: the manifest's tag= on the split AllReduces).
tagged="$(grep -m1 -o '^expect comm=gpucheck-split func=AllReduce .* tag=[1-9][0-9]*' "$work/job.out" | sed 's/.*tag=//' || true)"
if [ "$abi" -ge 7 ]; then
  if [ -n "$tagged" ]; then say "v7: kernel phases and the user tag $tagged on the split AllReduces checked"
  else say "v7: kernel phases checked; user tags NOT checked (this nccl.h has no ncclAllReduceConfig)"; fi
fi
network=(--network none)
[ "$mode" = multi ] && network=(--network expect --net "${net:-unknown}")
rc=0
"$work/ring-check" "$work/rings" --manifest "$work/job.out" --abi "$abi" "${network[@]}" \
  >"$work/ring-check.txt" 2>&1 || rc=$?
sed 's/^/gpu-check: /' "$work/ring-check.txt"
grep -E '^(FAIL|PASS|ring pid|plugin counters|network:|  (ok|FAIL) )' "$work/ring-check.txt" |
  sed 's/^/  /' >>"$summary" || true
grep -A3 '^FAIL' "$work/ring-check.txt" | grep 'e\.g\.' | head -30 >>"$summary" || true
[ "$rc" -eq 0 ] || fail "ring records (ring-check exit $rc; details in ring-check.txt)"
say "ring records: PASS"

# ---- 4. The same job with the agent reading, checked on /metrics ----
if [ -n "$agent_build" ]; then
  if wait "$agent_build"; then
    agent="$work/build/agent/ncclscope-agent"
    say "agent built"
  else
    tail -c 20000 "$work/logs/agent-build.log" >"$work/agent.log"
    say "agent not built (missing dependencies, or over ${agent_build_timeout}s; agent.log): rings checked only"
  fi
fi
if [ -n "$agent" ]; then
  command -v curl >/dev/null 2>&1 || fail "no curl to read the agent's /metrics (or SKIP_AGENT=1)"
  port=$((20000 + RANDOM % 20000))
  cat >"$work/agent.yaml" <<YAML
plugin:
  ring_dir: $work/rings2
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
  mkdir -p "$work/rings2"
  "$agent" --config "$work/agent.yaml" --web.listen-address "127.0.0.1:$port" >"$work/agent.log" 2>&1 &
  agent_pid=$!
  sleep 1
  run_job "$work/rings2" job2
  sleep 1
  metrics="$(curl -sf "http://127.0.0.1:$port/metrics")" || fail "no /metrics from the agent (agent.log)"
  grep -E '^ncclscope_nccl_[a-z_]+_(total|count)[{ ]' <<<"$metrics" | head -300 >"$work/metrics.txt" || true
  sum() { awk -v f="$1" '$1 ~ "^"f"[{ ]" {s+=$NF} END {printf "%d", s}' <<<"$metrics"; }
  want_ops=$(awk -v r="$ranks" '/^expect / {for (i=2;i<=NF;i++) if ($i ~ /^ops=/) {split($i,a,"="); s+=a[2]}} END {print s*r}' "$work/job2.out")
  want_timed=$(awk -v r="$ranks" '/^expect / && / timing=gpu / {for (i=2;i<=NF;i++) if ($i ~ /^ops=/) {split($i,a,"="); s+=a[2]}} END {print s*r}' "$work/job2.out")
  ops="$(sum ncclscope_nccl_ops_total)"
  timed="$(sum ncclscope_nccl_ops_timed_total)"
  say "agent: ncclscope_nccl_ops_total $ops (want $want_ops), with GPU timing $timed (want $want_timed)"
  [ "$ops" -eq "$want_ops" ] || fail "agent: ops (metrics.txt)"
  [ "$timed" -eq "$want_timed" ] || fail "agent: ops with GPU timing (metrics.txt)"
  if [ "$abi" -ge 7 ]; then
    phased="$(sum ncclscope_nccl_kernel_phase_ops_total)"
    say "agent (v7): ncclscope_nccl_kernel_phase_ops_total $phased"
    [ "$phased" -gt 0 ] || fail "agent: no operation with kernel phases under profiler ABI v7"
    if [ -n "$tagged" ]; then
      tag_ops="$(awk -v t="user_tag=\"$tagged\"" '$1 ~ /^ncclscope_nccl_user_tag_ops_total[{]/ && index($1, t) {s+=$NF} END {printf "%d", s}' <<<"$metrics")"
      want_tag_ops=$(awk -v r="$ranks" '/^expect comm=gpucheck-split func=AllReduce / && / tag=[1-9]/ {for (i=2;i<=NF;i++) if ($i ~ /^ops=/) {split($i,a,"="); s+=a[2]}} END {print s*r}' "$work/job2.out")
      say "agent (v7): ncclscope_nccl_user_tag_ops_total{user_tag=\"$tagged\"} $tag_ops (want $want_tag_ops)"
      [ "$tag_ops" -eq "$want_tag_ops" ] || fail "agent: ops per user tag (metrics.txt)"
    fi
  fi
  # What the agent read (the job has exited, so there is no live ncclscope_nccl_comm_info left).
  grep -E '^ncclscope_nccl_(records_total|rings_reclaimed_total)' <<<"$metrics" | sed 's/^/gpu-check: /' || true
fi

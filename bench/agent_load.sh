#!/usr/bin/env bash
# Agent CPU and memory under a simulated job (docs/benchmarks.md, "NCCL analytics"): the real
# ncclscope-agent reads the rings that the real plugin fills for ncclscope-sim's ranks (8 ranks,
# 5 collectives per iteration at 1000 iterations/s: 5000 collectives/s per rank), and is scraped
# every 15 s as Prometheus would. After a warm-up, the agent's CPU time (utime + stime from
# /proc/<pid>/stat) and resident memory (VmRSS, VmHWM from /proc/<pid>/status) are read over the
# measurement window, together with the operations it counted (so the load is shown, not assumed)
# and the records the plugins dropped.
#
# Usage: bench/agent_load.sh [single|multi] [measure_seconds]
#   single: 1 node x 8 GPUs, a tensor-parallel communicator (NVLink only: no network steps)
#   multi:  2 nodes x 8 GPUs, a world communicator (network steps, sampled 10 % of the time)
# Environment: POLL_INTERVAL (plugin.poll_interval, default the agent's 100ms), SCRAPE_INTERVAL
# (seconds between scrapes, default 15), PROXY_DUTY (plugin.proxy_duty_cycle, default the
# agent's 0.1), RECORD_ONE_IN (plugin.record_one_in, default 1) and RECORD_RATE_LIMIT
# (plugin.record_rate_limit, default the agent's 1000 ops/s per process; 0: every op recorded);
# bench/overhead_sweep.sh varies them. RATE (iterations per second per rank, default
# 1000, i.e. 5 collectives each): a low rate leaves what the agent costs per pass, not per op.
# AGENT_CPUS / SIM_CPUS (taskset lists, default unpinned): run the agent and the simulated job on
# CPUs of their own, as on a GPU node, where the agent does not share a core with the job's busy
# processes.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-single}
measure=${2:-60}
warmup=10
build=${BUILD:-build/default}
agent_bin=$build/agent/ncclscope-agent
sim_bin=$build/tools/ncclscope-sim
[ -x "$agent_bin" ] && [ -x "$sim_bin" ] || {
  echo "build first: cmake --build --preset default --target ncclscope-agent ncclscope-sim" >&2
  exit 1
}

work=$(mktemp -d /tmp/ncclscope-load-XXXXXX)
agent_pid=
sim_pid=
cleanup() {
  [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null && wait "$sim_pid" 2>/dev/null || true
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/rings"
cat >"$work/agent.yaml" <<EOF
plugin:
  ring_dir: $work/rings
  poll_interval: ${POLL_INTERVAL:-100ms}
  proxy_duty_cycle: ${PROXY_DUTY:-0.1}
  record_one_in: ${RECORD_ONE_IN:-1}
  record_rate_limit: ${RECORD_RATE_LIMIT:-1000}
# Only the NCCL profiler path is measured here.
ebpf:
  enabled: false
rdma:
  enabled: false
nvlink:
  enabled: false
EOF
pin() { if [ -n "$1" ]; then echo "taskset -c $1"; fi; }
$(pin "${AGENT_CPUS:-}") "$agent_bin" --config "$work/agent.yaml" --web.listen-address 127.0.0.1:0 2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 100); do
  url=$(sed -n 's/.*serving metrics on \(http:[^ "]*\).*/\1/p' "$work/agent.log" | head -1)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/agent.log" >&2; exit 1; }

workload=AllReduce:tp:1MiB,AllGather:tp:256KiB,ReduceScatter:tp:256KiB,AllReduce:tp:64KiB,Broadcast:tp:1MiB
nodes=1
if [ "$scenario" = multi ]; then
  workload=AllReduce:world:1MiB,AllGather:tp:256KiB,ReduceScatter:tp:256KiB,AllReduce:world:64KiB,Broadcast:tp:1MiB
  nodes=2
fi
NCCLSCOPE_RING_DIR=$work/rings $(pin "${SIM_CPUS:-}") "$sim_bin" --nodes $nodes --gpus 8 --workload "$workload" \
  --rate ${RATE:-1000} --compute-gap 40us --jitter 5us --duration $((warmup + measure + 5))s --quiet \
  2>"$work/sim.log" &
sim_pid=$!

ops() { curl -s "$url" | awk '/^ncclscope_nccl_ops_total[{ ]/ {s += $NF} END {printf "%d", s}'; }
ticks() { awk '{print $14 + $15}' "/proc/$agent_pid/stat"; }
status() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$agent_pid/status"; }

sleep $warmup
[ -n "${PERF_OUT:-}" ] && { perf record -q -g -o "$PERF_OUT" -p "$agent_pid" -- sleep 20 >/dev/null 2>&1 || true; }
t0=$(date +%s.%N); c0=$(ticks); o0=$(ops)
elapsed=0
scrape=${SCRAPE_INTERVAL:-15}
while [ "$elapsed" -lt "$measure" ]; do  # a Prometheus scrape every $scrape s
  step=$((measure - elapsed < scrape ? measure - elapsed : scrape))
  sleep "$step"
  elapsed=$((elapsed + step))
  curl -s -o /dev/null "$url"
done
t1=$(date +%s.%N); c1=$(ticks); o1=$(ops)
metrics=$(curl -s "$url")
hz=$(getconf CLK_TCK)
awk -v t0="$t0" -v t1="$t1" -v c0="$c0" -v c1="$c1" -v o0="$o0" -v o1="$o1" -v hz="$hz" \
    -v rss="$(status VmRSS)" -v hwm="$(status VmHWM)" -v scenario="$scenario" 'BEGIN {
  dt = t1 - t0
  printf "scenario %s: %.1f s measured\n", scenario, dt
  printf "  operations counted: %.0f/s (%.0f per rank per second)\n", (o1 - o0) / dt, (o1 - o0) / dt / 8
  printf "  agent CPU: %.3f %% of one core (%.2f ms of CPU per second)\n", 100 * (c1 - c0) / hz / dt, 1000 * (c1 - c0) / hz / dt
  printf "  agent memory: VmRSS %.1f MiB, peak VmHWM %.1f MiB\n", rss / 1024, hwm / 1024
}'
echo "$metrics" | awk '/^ncclscope_nccl_records_dropped_total/ {d += $NF}
  /^ncclscope_nccl_records_total/ {r += $NF}
  /^ncclscope_scrape_duration_seconds / {s = $NF}
  END {printf "  records read: %d, dropped by the plugins: %d; last scrape rendered in %.2f ms\n", r, d, s * 1000}'

#!/usr/bin/env bash
# The overhead sweep (docs/benchmarks.md, "Overhead sweep"): what ncclscope costs at each setting
# an operator can pick, in one run, side by side.
#
#   plugin  ns per 8-channel collective on NCCL's threads (bench/plugin_bench through the v6 ABI,
#           the mask honoured as NCCL does) for the event masks and duty cycles of the table
#           below, at 1 and 4 network steps per channel and direction (the plugin's work grows
#           with the steps a message takes, not with its bytes), and the harness alone
#   agent   CPU and RSS of the real agent reading 8 ranks x 5,000 collectives/s with network
#           records (bench/agent_load.sh multi) for plugin.poll_interval, the scrape interval and
#           plugin.proxy_duty_cycle
#
# Usage: bench/overhead_sweep.sh [plugin|agent ...]   (default both; ~12 minutes on 2 cores)
# Environment: MEASURE (seconds per agent run, default 30), BUILD (default build/default).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/default}
measure=${MEASURE:-30}
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(plugin agent)
work=$(mktemp -d /tmp/ncclscope-sweep-XXXXXX)
trap 'rm -rf "$work"' EXIT

plugin_sweep() {
  local bench=$build/bench/plugin_bench
  [ -x "$bench" ] || { echo "build first: cmake --build --preset default --target plugin_bench" >&2; exit 1; }
  # The plugin's cost for each mask NCCL can be given, measured with the duty cycles at 1 or 0
  # (NCCLSCOPE_KERNEL_DUTY / NCCLSCOPE_PROXY_DUTY), the overhead governor off (a benchmark loop is
  # all plugin calls, which it would throttle). A duty cycle d mixes two of them in time: with
  # ops arriving at a steady rate, a share d of them see the "on" mask, so the mean cost is
  # d x on + (1 - d) x off. Measuring a duty cycle in the loop itself would weight the cheap ops
  # by how many more of them fit in the same time.
  # name | NCCLSCOPE_EVENTS | kernel duty | proxy duty
  local masks=(
    "kernel_ch and network events|all|1|1"
    "kernel_ch, no network events|all|1|0"
    "no kernel_ch, no network events|all|0|0"
    "coll and p2p only|coll,p2p|1|1"
  )
  : >"$work/plugin.txt"
  for m in "${masks[@]}"; do
    IFS='|' read -r name events kernel proxy <<<"$m"
    NCCLSCOPE_EVENTS=$events NCCLSCOPE_KERNEL_DUTY=$kernel NCCLSCOPE_PROXY_DUTY=$proxy \
      NCCLSCOPE_OVERHEAD_BUDGET=0 "$bench" --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true --benchmark_min_time=0.5 \
      --benchmark_filter='^(BM_HarnessOnly/api:1|BM_Collective8ChannelsWithApiEvents|BM_Collective8ChannelsWithProxySteps/(1|4))$' \
      --benchmark_format=json 2>/dev/null >"$work/plugin.json"
    python3 - "$work/plugin.json" "$name" >>"$work/plugin.txt" <<'PY'
import json, sys
runs = {b["run_name"]: b["cpu_time"] for b in json.load(open(sys.argv[1]))["benchmarks"]
        if b.get("aggregate_name") == "median"}
print("|".join([sys.argv[2]] + ["%.1f" % runs[n] for n in (
    "BM_HarnessOnly/api:1", "BM_Collective8ChannelsWithApiEvents",
    "BM_Collective8ChannelsWithProxySteps/1", "BM_Collective8ChannelsWithProxySteps/4")]))
PY
  done
  python3 - "$work/plugin.txt" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    name, *ns = line.strip().split("|")
    rows[name] = [float(x) for x in ns]
harness = [r[0] for r in rows.values()]
print("## plugin: ns per 8-channel collective on NCCL's thread, the harness (%.0f-%.0f ns) subtracted"
      % (min(harness), max(harness)))
print("| setting | 8 channels | + 1 network step | + 4 network steps |\n|---|---|---|---|")
cost = lambda r: [x - r[0] for x in r[1:]]
for name, r in rows.items():
    print("| %s (measured) | %s |" % (name, " | ".join("%.0f" % x for x in cost(r))))
on = cost(rows["kernel_ch and network events"])
kernel_only = cost(rows["kernel_ch, no network events"])
off = cost(rows["no kernel_ch, no network events"])
def mix(kernel, proxy):  # kernel >= proxy: both windows start at the period's start
    return [proxy * a + (kernel - proxy) * b + (1 - kernel) * c for a, b, c in zip(on, kernel_only, off)]
for kernel, proxy, note in ((1, 0.1, " (the defaults)"), (1, 0.01, ""), (0.1, 0.1, ""),
                            (0.1, 0.01, "")):
    print("| kernel duty %g, proxy duty %g%s | %s |"
          % (kernel, proxy, note, " | ".join("%.0f" % x for x in mix(kernel, proxy))))
PY
}

agent_sweep() {
  # name | POLL_INTERVAL | SCRAPE_INTERVAL | PROXY_DUTY
  local settings=(
    "defaults: poll 100ms, scrape 15 s, proxy 0.1|100ms|15|0.1"
    "poll 20ms|20ms|15|0.1"
    "poll 1s|1s|15|0.1"
    "scrape 1 s|100ms|1|0.1"
    "scrape 5 s|100ms|5|0.1"
    "scrape 30 s|100ms|30|0.1"
    "proxy 1 (every network step)|100ms|15|1"
  )
  echo "## agent: 8 ranks x 5,000 collectives/s, 2 nodes (network records), ${measure} s each"
  printf '| setting | ops/s counted | agent CPU (%% of a core) | RSS (MiB) | peak RSS (MiB) | dropped |\n|---|---|---|---|---|---|\n'
  for s in "${settings[@]}"; do
    IFS='|' read -r name poll scrape proxy <<<"$s"
    local out
    out=$(POLL_INTERVAL=$poll SCRAPE_INTERVAL=$scrape PROXY_DUTY=$proxy BUILD=$build \
      bench/agent_load.sh multi "$measure")
    local ops cpu rss hwm dropped
    ops=$(sed -n 's/.*operations counted: \([0-9]*\)\/s.*/\1/p' <<<"$out")
    cpu=$(sed -n 's/.*agent CPU: \([0-9.]*\) %.*/\1/p' <<<"$out")
    rss=$(sed -n 's/.*VmRSS \([0-9.]*\) MiB.*/\1/p' <<<"$out")
    hwm=$(sed -n 's/.*VmHWM \([0-9.]*\) MiB.*/\1/p' <<<"$out")
    dropped=$(sed -n 's/.*dropped by the plugins: \([0-9]*\);.*/\1/p' <<<"$out")
    printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$ops" "$cpu" "$rss" "$hwm" "$dropped"
  done
}

for part in "${parts[@]}"; do
  case "$part" in
    plugin) plugin_sweep ;;
    agent) agent_sweep ;;
    *) echo "unknown part '$part' (plugin, agent)" >&2; exit 2 ;;
  esac
done

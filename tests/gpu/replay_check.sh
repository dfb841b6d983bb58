#!/usr/bin/env bash
# Unit test of the GPU check's checker (ctest gpu-check-on-replay), where there is no GPU: the
# GPU job's workload (workload.h) is driven through the real plugin .so by the replay driver
# (gpu-check-replay: one process per rank, two "nodes", network ProxyOps with IB net-plugin
# events from 2.26 on), and ring-check must pass its rings for every ABI version the plugin
# exports (1 to 7, each as the NCCL release whose newest ABI it is: 2.23 to 2.31), with the checks
# each version allows, and fail rings that disagree with the manifest or with the ABI NCCL's
# version picks.
#
# Usage: replay_check.sh GPU_CHECK_REPLAY RING_CHECK PLUGIN_SO FAKE_LIBCUDA
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 GPU_CHECK_REPLAY RING_CHECK PLUGIN_SO FAKE_LIBCUDA" >&2; exit 2; }
replay="$1" check="$2" plugin="$3" cuda="$4"
work="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-replay.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# As tests/gpu/run.sh sets them for the GPU job: every op timed, every network op recorded, and a
# ring large enough that nothing is dropped while nobody drains it.
export NCCLSCOPE_KERNEL_DUTY=1 NCCLSCOPE_PROXY_DUTY=1 NCCLSCOPE_RING_SIZE=64MiB NCCLSCOPE_RING_LANES=4
failures=0

# drive NAME ABI [gpu-check-replay options]: rings in $work/NAME/rings, manifest in .../manifest
drive() {
  local name="$1" abi="$2"
  shift 2
  mkdir -p "$work/$name/rings"
  NCCLSCOPE_RING_DIR="$work/$name/rings" "$replay" --plugin "$plugin" --cuda "$cuda" \
    --abi "$abi" --iterations 30 "$@" >"$work/$name/manifest"
}

# expect NAME RC PATTERN... -- RING-CHECK OPTIONS: ring-check exits RC and prints every PATTERN.
expect() {
  local name="$1" want="$2"
  shift 2
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  local rc=0
  "$check" "$work/$name/rings" --manifest "$work/$name/manifest" "$@" >"$work/$name/check.txt" || rc=$?
  local ok=1
  [ "$rc" -eq "$want" ] || ok=0
  for p in "${patterns[@]}"; do grep -qF -- "$p" "$work/$name/check.txt" || { ok=0; echo "$name: missing \"$p\""; }; done
  if [ "$ok" -eq 1 ]; then
    echo "ok: $name (ring-check exit $rc)"
  else
    echo "FAIL: $name: ring-check exit $rc, want $want; its output:"
    sed 's/^/    /' "$work/$name/check.txt"
    failures=$((failures + 1))
  fi
}

# What each version carries (ring-check's header): what it cannot carry must be absent, not
# reported missing.
for abi in 1 2 3 4 5 6 7; do
  drive "v$abi" "$abi"
  lines=("PASS"
    "ok   job line: the NCCL version the job ran picks this ABI"
    "ok   exact op count per (comm, func, bytes, peer) on every rank"
    "ok   exact counts: the count table totals the manifest's ops per (comm, rank)"
    "ok   exact counts: ops and bytes per (comm, rank, func) as the manifest's"
    "ok   self send/recv complete without GPU timing and not partial"
    "ok   k-th send from a to b has the bytes of b's k-th receive from a"
    "ok   network op joins its op record (comm, rank, op_index, func, seq)"
    "ok   every op between two nodes has network op records")
  if [ "$abi" -ge 4 ]; then
    lines+=("ok   communicator is one the job created (by name)"
      "ok   comm init: nranks and nnodes as the job ran"
      "ok   GPU timing on every announced channel (all ops but self send/recv)"
      "ok   network op on one of its op's timed channels")
  else
    lines+=("ok   communicator is one the job created (by id: no name before v4)"
      "ok   comm init under v1-v3: no name, nranks and nnodes unknown (0)")
  fi
  case "$abi" in
    1 | 2) lines+=("ok   v1/v2 (no KernelCh in NCCL 2.23-2.25): KERNEL_NOT_REQUESTED, no GPU timing"
      "ok   v1/v2 (no net-plugin events before NCCL 2.26): no NIC, no queue pair") ;;
    3) lines+=("ok   v3 (KernelCh without timestamps): KERNEL_UNTIMED, no GPU timing, not partial") ;;
  esac
  [ "$abi" -ge 3 ] && lines+=("ok   IB: network op names its NIC and a queue pair")
  if [ "$abi" -ge 5 ]; then
    lines+=("ok   AllGather/Broadcast: the API's count and float32 (API_COUNT)")
  else
    lines+=("ok   AllGather/Broadcast before v5 (no CollApi): count in bytes, int8")
  fi
  if [ "$abi" -ge 7 ]; then
    lines+=("ok   v7: kernel phases (OP_PHASES) with compute time on every timed channel of a collective"
      "ok   v7: p2p kernel phases, where present, well formed"
      "ok   v7: the call's user tag (OP_DETAIL), no symmetric kernel")
    grep -q '^expect comm=gpucheck-split func=AllReduce .* tag=[1-9]' "$work/v$abi/manifest" ||
      { echo "FAIL: v$abi: the replay job tagged no split AllReduce"; failures=$((failures + 1)); }
  fi
  expect "v$abi" 0 "${lines[@]}" -- --abi "$abi" --network expect --net IB
done
# The ABI NCCL 2.29 would pick (v6) is not what this job's NCCL (2.28, v5) chose.
drive wrong-abi 5
expect wrong-abi 1 "FAIL ring header: the ABI NCCL chose is the one its version picks" \
  "FAIL comm init: ABI version matches NCCL's" \
  "FAIL job line: the NCCL version the job ran picks this ABI" -- --abi 6 --network expect --net IB
# Rings of NCCL 2.26 (v3) checked as 2.27's (v4), which names its communicators at init: no
# name and no nranks where v4 has them, so no op is one of the job's.
drive v3-as-v4 3
expect v3-as-v4 1 "FAIL ring header: the ABI NCCL chose is the one its version picks" \
  "FAIL communicator is one the job created (by name)" \
  "FAIL comm init: nranks and nnodes as the job ran" \
  "FAIL every op is one the job issued (comm, func, bytes, peer)" -- --abi 4
# Without the job's list of communicator ids, v1-v3 rings name no communicator.
drive no-ids 2
sed -i '/^comm /d' "$work/no-ids/manifest"
expect no-ids 1 "FAIL communicator is one the job created (by id: no name before v4)" -- --abi 2
# One AllReduce the job issued never reached the plugin on rank 1.
drive missing-op 5 --break missing-op
expect missing-op 1 "FAIL exact op count per (comm, func, bytes, peer) on every rank" \
  "FAIL collective seq numbers 0..N-1 per (comm, func) on every rank" \
  "FAIL finalize: ops enqueued = completed = issued, none flushed" \
  "FAIL exact counts: the count table totals the manifest's ops per (comm, rank)" \
  "FAIL exact counts: ops and bytes per (comm, rank, func) as the manifest's" -- --abi 5 --network expect
# The same under 2.23 (v1), whose ops complete at NCCL's stop.
drive missing-op-v1 1 --break missing-op
expect missing-op-v1 1 "FAIL exact op count per (comm, func, bytes, peer) on every rank" \
  "FAIL exact counts: the count table totals the manifest's ops per (comm, rank)" \
  "FAIL exact counts: ops and bytes per (comm, rank, func) as the manifest's" -- --abi 1 --network expect
# One channel of an AllReduce started and never stopped: in flight until the communicator ended.
drive stuck-channel 5 --break stuck-channel
expect stuck-channel 1 "FAIL op ended normally" \
  "FAIL GPU timing on every announced channel (all ops but self send/recv)" \
  "FAIL plugin counter zero: ops in flight at finalize" -- --abi 5 --network expect
# A user tag other than the one the job gave (v7): the plugin must carry the call's own.
drive wrong-tag 7
sed -i 's/^\(expect comm=gpucheck-split func=AllReduce .* tag=\)[0-9]*$/\1 12345/; s/tag= 12345/tag=12345/' "$work/wrong-tag/manifest"
expect wrong-tag 1 "FAIL v7: the call's user tag (OP_DETAIL), no symmetric kernel" -- --abi 7 --network expect --net IB
# Rings with network ops where one node was expected.
drive one-node 6
expect one-node 1 "FAIL no network op records (one node)" -- --abi 6 --network none
# A manifest that lists nothing is a usage error, not a pass.
drive empty 5
: >"$work/empty/manifest"
expect empty 2 -- --abi 5

[ "$failures" -eq 0 ] || { echo "replay_check: $failures case(s) failed"; exit 1; }
echo "replay_check: all cases passed"

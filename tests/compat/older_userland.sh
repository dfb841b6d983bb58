#!/usr/bin/env bash
# The released plugin inside an older userland, the way a training container loads it: a Debian 11
# root (glibc 2.31, older than this machine's 2.36; made with debootstrap from Debian's packages) in
# which a job built there with that root's own compiler, the replay driver standing in for NCCL
# (tools/replay, driven by the GPU check's workload: tests/gpu/replay_job.cc), loads the plugin as
# NCCL does (dlopen RTLD_NOW | RTLD_LOCAL) and replays its collectives for each profiler ABI. The
# rings it leaves are then read on this machine by the agent's own reader (ring-check), as the
# agent reads them from its own container: every op of every rank must be there, whole.
#
# Usage: older_userland.sh PLUGIN_SO RING_CHECK [ROOT]
#   ROOT  where the Debian 11 root is kept between runs (default build/userland/bullseye); made
#         when missing (debootstrap needs root and deb.debian.org, as install-deps' apt does)
#   ABIS  environment: the profiler ABI versions to replay (default: every one the plugin exports)
# Exit: 0 pass, 1 a check failed, 77 skipped (not root, or no debootstrap; says so).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PLUGIN_SO RING_CHECK [ROOT]" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/../.." && pwd)"
plugin="$(realpath "$1")" check="$(realpath "$2")" root="${3:-$repo/build/userland/bullseye}"
say() { echo "older-userland: $*"; }
[ "$(id -u)" -eq 0 ] || { say "SKIPPED: needs root (debootstrap, chroot)"; exit 77; }
command -v debootstrap >/dev/null || { say "SKIPPED: no debootstrap (scripts/install-deps)"; exit 77; }

if [ ! -x "$root/usr/bin/g++" ]; then
  say "making a Debian 11 root in $root (debootstrap, once)"
  rm -rf "$root.partial"
  mkdir -p "$(dirname "$root")"
  debootstrap --variant=minbase --include=g++,libc6-dev bullseye "$root.partial" \
    http://deb.debian.org/debian >"$root.log" 2>&1 || { tail -20 "$root.log"; exit 1; }
  rm -rf "$root"
  mv "$root.partial" "$root"
fi
version_line() { "$@" --version | awk 'NR == 1 {print $NF}'; }  # awk reads it all: no SIGPIPE
glibc="$(version_line chroot "$root" /usr/bin/ldd)"
host_glibc="$(version_line ldd)"
say "root $root: glibc $glibc (this machine: $host_glibc)"
if [ "$(printf '%s\n%s\n' "$glibc" "$host_glibc" | sort -V | head -1)" = "$host_glibc" ]; then
  say "FAIL: the root's glibc is not older than this machine's: the test would prove nothing"
  exit 1
fi

# The job's sources, built inside the root by its own g++ (10): the replay driver and the
# workload, and a CUDA driver stand-in so the plugin names a GPU (tests/support/fake_libcuda.c).
work=/opt/ncclscope-compat
rm -rf "${root:?}$work"
mkdir -p "$root$work/src" "$root$work/lib" "$root$work/rings"
(cd "$repo" && tar cf - tools/replay plugin/abi plugin/ring/ncclscope_ring.h platform/clock.h \
  tests/gpu/replay_job.cc tests/gpu/workload.h tests/support/fake_libcuda.c) |
  tar xf - -C "$root$work/src"
cp "$plugin" "$root$work/lib/libnccl-profiler-ncclscope.so"
say "building the job in the root (g++ $(chroot "$root" g++ -dumpversion))"
chroot "$root" /bin/sh -c "cd $work/src && \
  g++ -std=c++20 -O1 -I. tests/gpu/replay_job.cc tools/replay/*.cc -pthread -ldl \
    -o $work/gpu-check-replay && \
  gcc -shared -fPIC -O1 -Wl,-soname,libcuda.so.1 tests/support/fake_libcuda.c \
    -o $work/lib/libcuda.so.1" \
  || { say "FAIL: the job does not build in the root"; exit 1; }

mounted=0
cleanup() { [ "$mounted" -eq 0 ] || umount "$root/proc" 2>/dev/null || true; }
trap cleanup EXIT
if ! mountpoint -q "$root/proc"; then
  mount -t proc proc "$root/proc" && mounted=1
fi

exported="$(objdump -T "$plugin" | sed -n 's/.* ncclProfiler_v\([0-9]*\)$/\1/p' | sort -n | tr '\n' ' ')"
abis="${ABIS:-$exported}"
say "the plugin exports ABI versions: $exported; replaying: $abis"
failures=0
for abi in $abis; do
  rings="$work/rings/v$abi"
  mkdir -p "$root$rings"
  # As tests/gpu/run.sh sets them: every op timed, every network op recorded, a ring large enough
  # that nothing is dropped while nobody drains it.
  if ! chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin NCCLSCOPE_RING_DIR="$rings" \
      NCCLSCOPE_KERNEL_DUTY=1 NCCLSCOPE_PROXY_DUTY=1 NCCLSCOPE_RING_SIZE=64MiB \
      NCCLSCOPE_RING_LANES=4 "$work/gpu-check-replay" \
      --plugin "$work/lib/libnccl-profiler-ncclscope.so" --cuda "$work/lib/libcuda.so.1" \
      --abi "$abi" --iterations 20 >"$root$rings.manifest" 2>"$root$rings.err"; then
    say "FAIL v$abi: the job failed in the root:"
    sed 's/^/    /' "$root$rings.err" | tail -20
    failures=$((failures + 1))
    continue
  fi
  # NCCL's IB transport names the NIC and queue pairs through net-plugin events, which NCCL has
  # from 2.26 (v3) on; before, ring-check checks that the records name none.
  net=()
  [ "$abi" -ge 3 ] && net=(--net IB)
  if "$check" "$root$rings" --manifest "$root$rings.manifest" --abi "$abi" --network expect \
      "${net[@]}" >"$root$rings.check" 2>&1; then
    say "ok v$abi: $(grep -c '^ok' "$root$rings.check") checks of the rings pass"
  else
    say "FAIL v$abi: ring-check:"
    sed 's/^/    /' "$root$rings.check"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] || { say "FAIL: $failures ABI version(s)"; exit 1; }
say "PASS: the plugin loads and records every op under glibc $glibc"

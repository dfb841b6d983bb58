// SPDX-License-Identifier: GPL-2.0-only
/* Empty uprobe and uretprobe programs: the cost floor of a probe pair on a machine, against which
 * bench/ebpf_uprobe_bench.cc compares the agent's real programs (probes.bpf.c). Not used by the
 * agent. */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("uprobe")
int ncclscope_floor_entry(void *ctx) { return 0; }

SEC("uretprobe")
int ncclscope_floor_return(void *ctx) { return 0; }

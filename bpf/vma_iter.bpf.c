// SPDX-License-Identifier: GPL-2.0-only
/* task_vma iterator: for one process (the agent sets the pid when it creates the iterator), writes
 * one struct ncclscope_vma_record per executable file mapping, naming the *real* inode behind it.
 *
 * Why: on overlayfs (container images) /proc/<pid>/maps and stat() show the overlay inode, which
 * differs per container, while the kernel places uprobes on the real inode of the layer the file
 * lives in (d_real_inode). Two containers sharing an image layer map the same real file; attaching
 * once per overlay path would count every call twice. The mmap'ed vm_file is the real file. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ncclscope/bpf_intf.h"

char LICENSE[] SEC("license") = "GPL";

#define VM_EXEC 0x00000004

SEC("iter/task_vma")
int ncclscope_vmas(struct bpf_iter__task_vma *ctx) {
  struct vm_area_struct *vma = ctx->vma;
  struct task_struct *task = ctx->task;
  if (!vma || !task) return 0;
  if (!(BPF_CORE_READ(vma, vm_flags) & VM_EXEC)) return 0;
  struct file *file = BPF_CORE_READ(vma, vm_file);
  if (!file) return 0;
  struct ncclscope_vma_record record = {};
  record.vm_start = BPF_CORE_READ(vma, vm_start);
  record.vm_end = BPF_CORE_READ(vma, vm_end);
  record.pgoff = BPF_CORE_READ(vma, vm_pgoff);
  record.ino = BPF_CORE_READ(file, f_inode, i_ino);
  record.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
  bpf_seq_write(ctx->meta->seq, &record, sizeof(record));
  return 0;
}

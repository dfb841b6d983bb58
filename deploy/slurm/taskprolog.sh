#!/bin/sh
# Slurm TaskProlog that makes ncclscope's NCCL profiler plugin the default for GPU tasks:
# slurmstepd runs it as the job's user before each task and reads its standard output, where
# "export NAME=value" sets NAME in the task's environment (slurm.conf(5), TaskProlog). Install:
#   cp deploy/slurm/taskprolog.sh /etc/slurm/ncclscope-taskprolog.sh    (on every GPU node)
#   slurm.conf:  TaskProlog=/etc/slurm/ncclscope-taskprolog.sh
# (If the site already has a TaskProlog, call this one from it and pass its output through.)
#
# It exports NCCL_PROFILER_PLUGIN and NCCLSCOPE_RING_DIR only when all of these hold, and prints
# nothing otherwise, so the task runs exactly as it would without ncclscope:
#   * the task has GPUs (Slurm's SLURM_STEP_GPUS / SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES);
#   * the job did not choose a profiler plugin itself (NCCL_PROFILER_PLUGIN unset), nor opt out
#     with NCCLSCOPE_TASKPROLOG=off;
#   * the plugin is installed and the ring directory (the agent's plugin.ring_dir; the systemd unit
#     creates /run/ncclscope with mode 1777) exists and is writable by the job's user.
# A ring directory the job set itself (NCCLSCOPE_RING_DIR) is kept. The plugin reads the job id
# from SLURM_JOB_ID on its own.
# Paths, for sites that install elsewhere (edit here; the environment of the task can override
# them, which only affects that user's own task):
plugin=${NCCLSCOPE_TASKPROLOG_PLUGIN:-/opt/ncclscope/lib/libnccl-profiler-ncclscope.so}
ring_dir=${NCCLSCOPE_RING_DIR:-${NCCLSCOPE_TASKPROLOG_RING_DIR:-/run/ncclscope}}

[ "${NCCLSCOPE_TASKPROLOG:-on}" = off ] && exit 0
[ -n "${NCCL_PROFILER_PLUGIN:-}" ] && exit 0

# GPUs of this task: gres/gpu sets SLURM_STEP_GPUS (steps) or SLURM_JOB_GPUS (batch step) and
# CUDA_VISIBLE_DEVICES; Slurm writes NoDevFiles when the step got none of the job's GPUs.
gpus=${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}}
case "$gpus" in
  "" | NoDevFiles) exit 0 ;;
esac

# Values go out one per line and are taken verbatim up to the end of the line.
case "$plugin$ring_dir" in
  *"
"*) exit 0 ;;
esac
[ -f "$plugin" ] && [ -r "$plugin" ] || exit 0
[ -d "$ring_dir" ] && [ -w "$ring_dir" ] && [ -x "$ring_dir" ] || exit 0

echo "export NCCL_PROFILER_PLUGIN=$plugin"
[ -n "${NCCLSCOPE_RING_DIR:-}" ] || echo "export NCCLSCOPE_RING_DIR=$ring_dir"
exit 0

#!/bin/sh
# Runs a command as in a container: in new mount and PID namespaces, with LOWER (a directory holding
# a library) mounted through an overlay at MERGED, a path only that mount namespace sees.
# usage: container_run.sh LOWER UPPER WORK MERGED COMMAND...
set -e
lower=$1 upper=$2 work=$3 merged=$4
shift 4
mkdir -p "$upper" "$work" "$merged"
exec unshare --mount --pid --fork --propagation private sh -c '
  mount -t overlay overlay -o "lowerdir=$0,upperdir=$1,workdir=$2" "$3" && shift 3 && exec "$@"
' "$lower" "$upper" "$work" "$merged" "$@"

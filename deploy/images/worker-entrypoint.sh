#!/bin/sh
# The worker container's entry point. Started as root with only CAP_CHOWN, CAP_SETUID,
# CAP_SETGID, CAP_SETPCAP and CAP_SYS_ADMIN (deploy/README.md, "What a worker needs"), it
#   1. makes an `akbench` cgroup below the container's own group of each controller the
#      sandbox limits with (cgroup v1: memory, pids, cpu; v2: the container's group, its
#      /sys/fs/cgroup remounted read-write when the runtime mounted it read-only, its
#      processes moved to a leaf first) and gives it to the worker user, so the worker can
#      make one group per attempt there and nothing above it (CAP_CHOWN);
#   2. unmounts what the container runtime mounted over parts of /proc (/proc/kcore,
#      /proc/keys, read-only /proc/sys, ...; CAP_SYS_ADMIN): the kernel lets a user
#      namespace mount a /proc of its own only where a /proc without such covers is
#      visible, and the sandbox needs one (its own /proc/sys and the rest are read-only
#      inside the sandbox);
#   3. with AKBENCH_STATE_DIR set (compose: a named volume shared by the replicas), takes a
#      replica folder there and binds it over the worker's home (CAP_SYS_ADMIN): the first
#      `replica-*` folder no live replica holds (its `replica-*.lock` is free), so a
#      restarted or rescaled worker reuses a stopped one's mirror cache, else a new one.
#      The lock is held by the worker for its whole life (file descriptor 9). Every folder is in the
#      one volume, which `down -v` removes even after a plain `down` (anonymous volumes
#      were left behind then);
#   4. runs akbench-worker as the worker user (AKBENCH_WORKER_UID, default 10001) with no
#      capabilities, an empty bounding set (CAP_SETPCAP) and no_new_privs (CAP_SETUID,
#      CAP_SETGID). The sandboxed programs then run in a user namespace of that uid
#      (bubblewrap), never as root.
# Started as another user (e.g. Kubernetes runAsUser) it runs the worker as it is; the
# worker's start-up check then says what is missing.
set -eu
uid=${AKBENCH_WORKER_UID:-10001}
worker=/usr/local/bin/akbench-worker
if [ "$(id -u)" != 0 ]; then
  exec "$worker" "$@"
fi
give() { # give DIR: DIR and its control files to the worker user
  mkdir -p "$1" && chown -R "$uid:$uid" "$1"
}
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
  # cgroup v2: the container's group ($own) may hold no processes once it has children
  # with controllers, so everything moves to $own/init first.
  own=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
  own=${own%/}
  # Container runtimes mount the container's cgroup namespace read-only (Kubernetes on v2
  # nodes, docker --cgroupns=private): remount it read-write (CAP_SYS_ADMIN; this is the
  # container's own subtree, not the node's).
  if [ ! -w "$own/cgroup.subtree_control" ] && grep -q ' /sys/fs/cgroup cgroup2 ro[, ]' /proc/self/mounts; then
    mount -o remount,rw /sys/fs/cgroup 2>/dev/null ||
      echo "akbench-worker-entrypoint: cannot remount /sys/fs/cgroup read-write (CAP_SYS_ADMIN, or AppArmor refusing mount?)" >&2
  fi
  if [ -w "$own/cgroup.subtree_control" ]; then
    mkdir -p "$own/init"
    while read -r pid; do echo "$pid" > "$own/init/cgroup.procs" 2>/dev/null || true; done < "$own/cgroup.procs"
    for c in memory pids cpu; do echo "+$c" > "$own/cgroup.subtree_control" 2>/dev/null || true; done
    give "$own/akbench"
    for c in memory pids cpu; do echo "+$c" > "$own/akbench/cgroup.subtree_control" 2>/dev/null || true; done
  else
    echo "akbench-worker-entrypoint: $own is not writable (cgroup v2 mounted read-only); the sandbox will not start" >&2
  fi
else
  for c in memory pids cpu; do
    path=$(awk -F: -v c="$c" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3 }' /proc/self/cgroup)
    dir=/sys/fs/cgroup/$c${path%/}
    if [ -d "$dir" ] && [ -w "$dir" ]; then
      give "$dir/akbench"
    else
      echo "akbench-worker-entrypoint: $dir is missing or read-only (bind /sys/fs/cgroup/$c read-write); the sandbox will not start" >&2
    fi
  done
fi
if [ -n "${AKBENCH_STATE_DIR:-}" ]; then
  # The volume's root and the locks stay root's (this entry point has no CAP_DAC_OVERRIDE:
  # it writes only what root owns); each replica folder is the worker user's.
  state=$AKBENCH_STATE_DIR
  mine=
  for lock in "$state"/replica-*.lock; do
    [ -f "$lock" ] || continue
    exec 9>>"$lock"
    if flock -n 9; then mine=${lock%.lock}; mkdir -p "$mine"; break; fi
    exec 9>&-
  done
  # A new folder; a replica starting at the same moment may take its lock first (it saw
  # the lock file before this one locked it): then it is that replica's, and this one
  # makes another.
  while [ -z "$mine" ]; do
    mine=$(mktemp -d "$state/replica-XXXXXXXX")
    exec 9>>"$mine.lock"
    flock -n 9 || { exec 9>&-; mine=; }
  done
  chown "$uid:$uid" "$mine"
  home=$(getent passwd "$uid" | cut -d: -f6)
  mount --bind "$mine" "${home:-/home/akbench}" || {
    echo "akbench-worker-entrypoint: cannot bind $mine over the worker's home (CAP_SYS_ADMIN missing?)" >&2
    exit 1
  }
  echo "akbench-worker-entrypoint: replica folder $mine" >&2
fi
# Innermost first: /proc/sys/fs/binfmt_misc before /proc/sys.
awk '$5 ~ /^\/proc\// { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
    echo "akbench-worker-entrypoint: cannot unmount $m (CAP_SYS_ADMIN missing?); the sandbox will not start" >&2
done
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all --bounding-set=-all \
  --no-new-privs -- "$worker" "$@"

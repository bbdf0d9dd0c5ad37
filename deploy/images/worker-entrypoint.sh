#!/bin/sh
# The worker container's entry point. Started as root with only CAP_CHOWN, CAP_SETUID,
# CAP_SETGID, CAP_SETPCAP and CAP_SYS_ADMIN (deploy/README.md, "What a worker needs"), it
#   1. makes an `akbench` cgroup below the container's own group of each controller the
#      sandbox limits with (cgroup v1: memory, pids, cpu; v2: the container's group, its
#      processes moved to a leaf first) and gives it to the worker user, so the worker can
#      make one group per attempt there and nothing above it (CAP_CHOWN);
#   2. unmounts what the container runtime mounted over parts of /proc (/proc/kcore,
#      /proc/keys, read-only /proc/sys, ...; CAP_SYS_ADMIN): the kernel lets a user
#      namespace mount a /proc of its own only where a /proc without such covers is
#      visible, and the sandbox needs one (its own /proc/sys and the rest are read-only
#      inside the sandbox);
#   3. runs akbench-worker as the worker user (AKBENCH_WORKER_UID, default 10001) with no
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
# Innermost first: /proc/sys/fs/binfmt_misc before /proc/sys.
awk '$5 ~ /^\/proc\// { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
    echo "akbench-worker-entrypoint: cannot unmount $m (CAP_SYS_ADMIN missing?); the sandbox will not start" >&2
done
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all --bounding-set=-all \
  --no-new-privs -- "$worker" "$@"

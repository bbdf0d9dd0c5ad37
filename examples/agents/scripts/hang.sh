#!/usr/bin/env bash
# hang agent: leaves a process tree behind and never finishes on its own.
#   this script (sleep 3600 in the foreground)
#   └─ child subshell (waits)            <- backgrounded
#      └─ grandchild sleep 3600          <- backgrounded inside the child
# All pids go to $HOME/pids ("role pid" per line) so a test can check that the harness
# killed every one of them at the timeout.
pids="${HOME:?}/pids"
: >"$pids"
echo "script $$" >>"$pids"
(
    sleep 3600 &
    echo "grandchild $!" >>"$pids"
    wait
) &
echo "child $!" >>"$pids"
echo "hang: started child $! and a grandchild; sleeping (pids in $pids)"
sleep 3600

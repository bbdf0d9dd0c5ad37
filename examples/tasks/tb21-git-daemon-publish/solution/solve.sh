#!/bin/bash
# Reference solution: one commit in a scratch clone, pushed into a bare repository,
# then git daemon in the background.
set -euo pipefail
work=$(mktemp -d)
cp -a /app/project/. "$work/"
git -C "$work" init -q -b main
git -C "$work" add -A
git -C "$work" -c user.name=oracle -c user.email=oracle@example.invalid commit -q -m "initial import"
mkdir -p /srv/git
git clone -q --bare "$work" /srv/git/calc.git
rm -rf "$work"
git daemon --reuseaddr --base-path=/srv/git --export-all --listen=127.0.0.1 --port=9418 \
    --detach --pid-file=/tmp/git-daemon.pid /srv/git
for _ in $(seq 1 50); do
    python3 -c 'import socket; socket.create_connection(("127.0.0.1", 9418), timeout=1)' 2>/dev/null && exit 0
    sleep 0.1
done
echo "git daemon did not start" >&2
exit 1

#!/bin/sh
# Starts minisrv in the background, then runs the container's command.
python3 /usr/local/lib/minisrv/minisrv.py >/var/log/minisrv.log 2>&1 &
exec "$@"

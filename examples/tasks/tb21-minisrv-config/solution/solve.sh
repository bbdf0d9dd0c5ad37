#!/bin/bash
# Reference solution: the site's folder and index page in minisrv's configuration
# (it reads it on every request: no restart).
set -euo pipefail
cat > /etc/minisrv/minisrv.ini <<'INI'
[server]
# Where the site's files are.
root = /var/www/site
# The page served for /.
index = index.html
INI

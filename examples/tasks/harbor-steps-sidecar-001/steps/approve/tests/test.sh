#!/bin/bash
source /tests/kv.sh
got=$(kv_get release-2.4)
echo "release-2.4 = $got"
reward_if test "$got" = "approved-by-dana"

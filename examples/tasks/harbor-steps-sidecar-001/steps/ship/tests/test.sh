#!/bin/bash
# The service kept step one's key: the two steps ran beside one service.
source /tests/kv.sh
approved=$(kv_get release-2.4)
status=$(kv_get release-2.4-status)
echo "release-2.4 = $approved; release-2.4-status = $status"
reward_if test "$approved" = "approved-by-dana" -a "$status" = "shipped-after-approved-by-dana"

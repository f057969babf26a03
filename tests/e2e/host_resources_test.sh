#!/bin/bash
# End to end: rankd sizes itself from what its process may use, not the
# host. Under `taskset -c 0` the start-up log reports one usable CPU (affinity
# 1), and the host-memory line names where its figure came from. (cgroup
# quotas and memory limits are covered by kernels/cpu:host_resources_test on
# fake cgroup trees; this machine's own cgroup may have none.)
source "$(dirname "$0")/lib.sh"

startup_log() {  # startup_log OUT [command prefix...]: first lines of a serve
  local out="$1"
  shift
  run_bounded 30 "$@" "$RANKD" serve --model_root "$TMP/no_models" --grpc_port 0 --http_port -1 \
    --metrics_port -1 >"$out" 2>&1
}

startup_log "$TMP/one.log" taskset -c 0
expect_grep "one CPU in the affinity mask" "$TMP/one.log" 'CPUs: 1 usable \([0-9]+ online, affinity 1,'
expect_grep "host memory line" "$TMP/one.log" 'host memory: [0-9.]+ [KMGT]?i?B available \('
expect_grep "no model root: exits with an error" "$TMP/one.log" 'model root does not exist' 

startup_log "$TMP/all.log"
cpus=$(nproc)
expect_grep "every CPU of the affinity mask" "$TMP/all.log" "CPUs: [0-9]+ usable \([0-9]+ online, affinity $cpus,"

finish

#!/usr/bin/env bash
# HDFS's own NameNode benchmark (org.apache.hadoop.hdfs.server.namenode.NNThroughputBenchmark, from the
# hadoop-hdfs 3.4.1 test-jar) against the running peer NameNode over Hadoop RPC.
#
#   bench/hdfs/nnthroughput.sh OP THREADS FILES [extra NNThroughputBenchmark args...]
#     OP: create | mkdirs | open | delete | fileStatus | rename | append | blockReport | replication | clean | all
#     FILES is the number of files (directories for mkdirs; for blockReport pass -datanodes etc. as extras)
#
# Prints the benchmark's own report, then one JSON line:
#   {"op":"create","threads":4,"files":20000,"ops_per_s":1234.5,...}
# Environment: NN_URI (default hdfs://127.0.0.1:8020), HDFS_PEER_DIR, BENCH_HEAP (default 512m).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OP="${1:?usage: $0 OP THREADS FILES [extra args]}"
THREADS="${2:?usage: $0 OP THREADS FILES}"
FILES="${3:?usage: $0 OP THREADS FILES}"
shift 3
NAME=nnthroughput
source "$HERE/client-env.sh"

# mkdirs counts directories (-dirs N); every other op counts files (-files N).
COUNT_FLAG=-files; [[ "$OP" == mkdirs ]] && COUNT_FLAG=-dirs
out="$(mktemp)"; trap 'rm -f "$out"' EXIT
set +e
client_java INFO "" org.apache.hadoop.hdfs.server.namenode.NNThroughputBenchmark \
  -fs "$NN_URI" -op "$OP" -threads "$THREADS" "$COUNT_FLAG" "$FILES" "$@" 2>&1 | tee "$out" \
  | grep -E -- '---|# operations|Elapsed Time|Ops per sec|Average Time|nrFiles|nrThreads|nrFilesPerDir|Exception|ERROR' >&2
rc=${PIPESTATUS[0]}
set -e
[[ $rc == 0 ]] || { echo "nnthroughput: NNThroughputBenchmark exited with $rc" >&2; tail -30 "$out" >&2; exit "$rc"; }

# The report is "--- <op> stats  ---" followed by "Ops per sec: X"; with -op all there are several.
awk -v threads="$THREADS" -v files="$FILES" -v uri="$NN_URI" '
  /--- .* stats *---/ { for (i = 2; i <= NF; i++) if ($i == "stats") op = $(i-1) }
  /# operations:/     { n=$NF }
  /Elapsed Time:/     { el=$NF }
  /Ops per sec:/      { printf "{\"op\":\"%s\",\"threads\":%d,\"files\":%d,\"ops_per_s\":%s,\"operations\":%s,\"elapsed_ms\":%s,\"target\":\"%s\",\"tool\":\"NNThroughputBenchmark\",\"hadoop\":\"3.4.1\"}\n", op, threads, files, $NF, n, el, uri; found=1 }
  END { if (!found) exit 1 }' "$out" || { echo "nnthroughput: no 'Ops per sec' in the output" >&2; exit 1; }

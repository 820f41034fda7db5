#!/usr/bin/env bash
# RpcBench (bench/hdfs/RpcBench.java): HDFS's NameNode over Hadoop RPC for the operations
# NNThroughputBenchmark lacks (ls, chmod) and stat, closed-loop on the paths of an existing tree.
#
#   bench/hdfs/rpcbench.sh OP THREADS SECONDS [ROOT]      OP: ls | chmod | stat; ROOT defaults to /bench
#   bench/hdfs/rpcbench.sh fill THREADS COUNT DIR          COUNT empty files in DIR (for bench bigdir)
#
# Compiles RpcBench.java against the peer's jars on first use (into $HDFS_PEER_DIR/classes), prints the
# JSON line of RpcBench. Environment: NN_URI (default hdfs://127.0.0.1:8020), HDFS_PEER_DIR, BENCH_HEAP.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OP="${1:?usage: $0 OP THREADS SECONDS [ROOT]}"
THREADS="${2:?usage: $0 OP THREADS SECONDS [ROOT]}"
SECONDS_="${3:?usage: $0 OP THREADS SECONDS [ROOT]}"
ROOT="${4:-/bench}"
NAME=rpcbench
source "$HERE/client-env.sh"
CLASSES="$PEER_DIR/classes"
if [[ ! -f "$CLASSES/RpcBench.class" || "$HERE/RpcBench.java" -nt "$CLASSES/RpcBench.class" ]]; then
  mkdir -p "$CLASSES"
  javac -nowarn -d "$CLASSES" -cp "$LIB/*" "$HERE/RpcBench.java"
fi
client_java WARN "$CLASSES:" RpcBench "$NN_URI" "$OP" "$THREADS" "$SECONDS_" "$ROOT"

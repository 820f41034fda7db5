#!/usr/bin/env bash
# RpcBench (bench/hdfs/RpcBench.java): HDFS's NameNode over Hadoop RPC for the operations
# NNThroughputBenchmark lacks (ls, chmod) and stat, closed-loop on the paths of an existing tree.
#
#   bench/hdfs/rpcbench.sh OP THREADS SECONDS [ROOT]      OP: ls | chmod | stat; ROOT defaults to /bench
#
# Compiles RpcBench.java against the peer's jars on first use (into $HDFS_PEER_DIR/classes), prints the
# JSON line of RpcBench. Environment: NN_URI (default hdfs://127.0.0.1:8020), HDFS_PEER_DIR, BENCH_HEAP.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OP="${1:?usage: $0 OP THREADS SECONDS [ROOT]}"
THREADS="${2:?usage: $0 OP THREADS SECONDS [ROOT]}"
SECONDS_="${3:?usage: $0 OP THREADS SECONDS [ROOT]}"
ROOT="${4:-/bench}"
NN_URI="${NN_URI:-hdfs://127.0.0.1:${NN_RPC_PORT:-8020}}"
PEER_DIR="${HDFS_PEER_DIR:-/tmp/nimbus-hdfs-peer}"
CONF="$PEER_DIR/conf"
LIB="$HERE/lib"
CLASSES="$PEER_DIR/classes"
[[ -d "$LIB" ]] || "$HERE/hdfs-peer.sh" install
[[ -f "$CONF/core-site.xml" ]] || { echo "rpcbench: no $CONF/core-site.xml; run bench/hdfs/hdfs-peer.sh start" >&2; exit 1; }
if [[ ! -f "$CLASSES/RpcBench.class" || "$HERE/RpcBench.java" -nt "$CLASSES/RpcBench.class" ]]; then
  mkdir -p "$CLASSES"
  javac -nowarn -d "$CLASSES" -cp "$LIB/*" "$HERE/RpcBench.java"
fi
exec java -Xmx"${BENCH_HEAP:-512m}" \
  --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED \
  --add-opens java.base/java.net=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED \
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED \
  -Dlog4j.configuration="file:$CONF/log4j.properties" -Dhadoop.root.logger=WARN,console \
  -Dhadoop.log.dir="$PEER_DIR/logs" -Dhadoop.log.file=rpcbench.log \
  -cp "$CLASSES:$CONF:$LIB/*" RpcBench "$NN_URI" "$OP" "$THREADS" "$SECONDS_" "$ROOT"

# Sourced by the scripts that run a Java client against the HDFS peer (nnthroughput.sh, rpcbench.sh):
# where the jars and the peer's configuration are, and how to start a JVM with them.
#   NAME: the calling script's name, for messages; HERE: its directory.
# Environment: NN_URI (default hdfs://127.0.0.1:$NN_RPC_PORT, 8020), HDFS_PEER_DIR, BENCH_HEAP (512m).
NN_URI="${NN_URI:-hdfs://127.0.0.1:${NN_RPC_PORT:-8020}}"
PEER_DIR="${HDFS_PEER_DIR:-/tmp/nimbus-hdfs-peer}"
CONF="$PEER_DIR/conf"
LIB="$HERE/lib"
[[ -d "$LIB" ]] || "$HERE/hdfs-peer.sh" install
[[ -f "$CONF/core-site.xml" ]] || { echo "$NAME: no $CONF/core-site.xml; run bench/hdfs/hdfs-peer.sh start" >&2; exit 1; }

# client_java LOGLEVEL CLASSPATH MAIN ARGS...: the JVM with the peer's configuration and Hadoop's jars
# after CLASSPATH, logging at LOGLEVEL to the console and to $PEER_DIR/logs/$NAME.log.
client_java() {
  local level="$1" cp="$2"; shift 2
  java -Xmx"${BENCH_HEAP:-512m}" \
    --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED \
    --add-opens java.base/java.net=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED \
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED \
    -Dlog4j.configuration="file:$CONF/log4j.properties" -Dhadoop.root.logger="$level,console" \
    -Dhadoop.log.dir="$PEER_DIR/logs" -Dhadoop.log.file="$NAME.log" \
    -cp "$cp$CONF:$LIB/*" "$@"
}

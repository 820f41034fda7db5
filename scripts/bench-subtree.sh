#!/usr/bin/env bash
# scripts/bench-subtree.sh: the subtree operations on Nimbus and on HDFS 3.4.1 in one run.
#
# For each operation (delete, mv, chmod) and tree size, `nimbus bench subtree` builds a tree of N
# files in the Spotify shape and times the one operation on its root, with a background stat/create
# load outside the tree: against an embedded Nimbus, then against the HDFS peer
# (bench/hdfs/hdfs-peer.sh) over WebHDFS, where the delete and the move are one NameNode call each,
# as `hdfs dfs -rm -r -skipTrash` and `-mv` are (chmod -R over WebHDFS is a client walk: HDFS's
# shell walks too). JSON per run in OUT; a markdown table on stdout.
#
#   FILES="65536" OPS="delete mv chmod" OUT=/tmp/bench-subtree bash scripts/bench-subtree.sh
#
# HDFS is started (and stopped at the end) unless it is already up; its tree is built over WebHDFS,
# about 1-2 thousand files a second here, so keep FILES modest for it (HDFS_FILES, default FILES).
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${FILES:-65536}
HDFS_FILES=${HDFS_FILES-$FILES} # empty: Nimbus only
OPS=${OPS:-"delete mv"}
OUT=${OUT:-/tmp/bench-subtree}
BIN=${BIN:-$OUT/nimbus}
mkdir -p "$OUT"
go build -o "$BIN" ./cmd/nimbus

started_hdfs=""
cleanup() { if [[ -n "$started_hdfs" ]]; then bench/hdfs/hdfs-peer.sh stop >&2 || true; fi; }
trap cleanup EXIT
if [[ -n "$HDFS_FILES" ]] && ! bench/hdfs/hdfs-peer.sh status >/dev/null 2>&1; then
  bench/hdfs/hdfs-peer.sh install >&2
  bench/hdfs/hdfs-peer.sh start >&2
  started_hdfs=1
fi
hdfs_http=${NN_HTTP_PORT:-9871}

for op in $OPS; do
  for n in $FILES; do
    echo "== nimbus $op $n" >&2
    "$BIN" bench subtree --files "$n" --op "$op" --json "$OUT/nimbus-$op-$n.json" >&2
  done
  for n in $HDFS_FILES; do
    echo "== hdfs $op $n" >&2
    "$BIN" bench subtree --files "$n" --op "$op" --target "webhdfs://127.0.0.1:$hdfs_http" --user "$(whoami)" \
      --json "$OUT/hdfs-$op-$n.json" >&2
  done
done

python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("| system | op | files | seconds | server memory before → max, MiB | Go heap / block cache before → max, MiB | background ops/s before → during |")
print("|---|---|---:|---:|---|---|---|")
for f in sorted(glob.glob(os.path.join(out, "*-*-*.json")), key=lambda f: (os.path.basename(f).split("-")[1], os.path.basename(f).split("-")[0], int(os.path.basename(f).split("-")[2].split(".")[0]))):
    r = json.load(open(f))["results"][0]
    sysname = os.path.basename(f).split("-")[0]
    parts = ""
    if r.get("server_go_heap_mb_max"):
        parts = f"{r.get('server_go_heap_mb_before', 0):.0f} → {r['server_go_heap_mb_max']:.0f} / {r.get('server_block_cache_mb_before', 0):.0f} → {r.get('server_block_cache_mb_max', 0):.0f}"
    print(f"| {sysname} | {r['op']} | {r['files']} | {r['seconds']:.3f} | {r['server_rss_mb_before']:.0f} → {r['server_rss_mb_max']:.0f} | {parts} | {r['background_ops_s_before']:.0f} → {r['background_ops_s_during']:.0f} |")
PY

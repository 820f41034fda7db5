#!/usr/bin/env bash
# What reading the request record on every write costs: Nimbus built at $BASE (a first submission
# locks its record without reading it) and at HEAD (every attempt reads it), each served fresh on
# the embedded store and on PostgreSQL (a private cluster, scripts/pg.sh; a fresh database per
# run), `nimbus bench micro` of $OPS at each of $CLIENTS over the RPC (whose client gives every
# write a request id), the two builds alternating for $ROUNDS rounds. Each point prints ops/s and
# the server's CPU per operation; the JSON documents go to $OUT, and $OUT/summary.txt has one line
# per point: store round side op clients ops/s server-µs/op.
#
#   BASE=d716e31 scripts/bench-once-read.sh                   # ~10 minutes
#   BASE=d716e31 STORES=embedded OPS=create ROUNDS=1 scripts/bench-once-read.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BASE="${BASE:?set BASE to the commit to compare HEAD with}"
OUT="${OUT:-/tmp/nimbus-once-read}"
ADDR="${ADDR:-127.0.0.1:9883}"
OPS="${OPS:-create mkdir}"
CLIENTS="${CLIENTS:-16,64}"
DURATION="${DURATION:-10s}"
ROUNDS="${ROUNDS:-2}"
STORES="${STORES:-embedded postgres}"
export NIMBUS_PG_DIR="${NIMBUS_PG_DIR:-/tmp/nimbus-once-read-pg}"
export NIMBUS_PG_PORT="${NIMBUS_PG_PORT:-56600}"

mkdir -p "$OUT"
src="$OUT/base-src"
rm -rf "$src" && mkdir -p "$src"
git archive "$BASE" | tar -x -C "$src"
(cd "$src" && GOFLAGS=-buildvcs=false go build -o "$OUT/nimbus-base" ./cmd/nimbus)
GOFLAGS=-buildvcs=false go build -o "$OUT/nimbus-head" ./cmd/nimbus
rm -rf "$src"
BIN="$OUT/nimbus-head" # the driver: one build drives both servers

SERVER=""
PG=""
cleanup() {
  [[ -n "$SERVER" ]] && { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true; }
  [[ -n "$PG" ]] && scripts/pg.sh stop || true
}
trap cleanup EXIT
start_server() { # BINARY [FLAGS...]
  rm -rf "$OUT/data"
  "$@" --data "$OUT/data" --listen "$ADDR" --log-level warn >"$OUT/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 150); do curl -sf "http://$ADDR/readyz" >/dev/null && return; sleep 0.1; done
  echo "server did not start: $(tail -3 "$OUT/serve.log")" >&2
  exit 1
}
stop_server() {
  kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true
  SERVER=""
}

: >"$OUT/summary.txt"
echo "once-read A/B: base $(git rev-parse --short "$BASE") against head $(git rev-parse --short HEAD), $CLIENTS clients, $DURATION per point"
for st in $STORES; do
  flags=()
  if [[ "$st" == postgres ]]; then
    URL="$(scripts/pg.sh start)"
    PG=1
    BASEURL="${URL%%/postgres\?*}"
  fi
  for round in $(seq "$ROUNDS"); do
    for side in base head; do
      if [[ "$st" == postgres ]]; then
        psql -q "$URL" -c 'DROP DATABASE IF EXISTS nimbus_once' -c 'CREATE DATABASE nimbus_once'
        flags=(--store "$BASEURL/nimbus_once?sslmode=disable")
      fi
      start_server "$OUT/nimbus-$side" serve "${flags[@]}"
      for op in $OPS; do
        js="$OUT/$st-$op-$side-r$round.json"
        "$BIN" bench micro --target "nimbus://$ADDR" --op "$op" --clients "$CLIENTS" --duration "$DURATION" \
          --files 2000 --no-echo --json "$js" >/dev/null
        python3 - "$st" "$round" "$side" "$js" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
st, rnd, side, path = sys.argv[1:5]
for r in json.load(open(path))["results"]:
    s = r.get("server") or {}
    print(f"{st:8s} r{rnd} {side:4s} {r['op']:6s} {r['clients']:3d} {r['throughput_ops_s']:9.0f} ops/s  server {s.get('cpu_us_per_op', 0):6.1f} µs/op  errors {r['errors']}")
PY
      done
      stop_server
    done
  done
done
# HEAD over BASE, per store, op and clients, each round and both rounds' sums.
python3 - "$OUT/summary.txt" <<'PY'
import collections, sys
pts = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f = line.split()
    pts[(f[0], f[3], int(f[4]))][(f[1], f[2])] = float(f[5])
for (st, op, c), v in sorted(pts.items()):
    rounds = sorted({r for r, _ in v})
    ratios = [v[(r, "head")] / v[(r, "base")] for r in rounds if (r, "head") in v and (r, "base") in v]
    tb = sum(v.get((r, "base"), 0) for r in rounds); th = sum(v.get((r, "head"), 0) for r in rounds)
    print(f"{st:8s} {op:6s} {c:3d} clients: head/base " + " ".join(f"{x:.3f}" for x in ratios) + f"  (sums {th/tb:.3f})")
PY

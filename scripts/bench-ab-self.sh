#!/usr/bin/env bash
# A/B of built nimbus binaries in one sitting, each one whole: it serves a fresh embedded store, its own
# `bench prepare` lays out the tree of $FILES files and its own `bench micro` drives every op of $OPS at
# $CLIENTS clients, so that a change on the client's side (the driver) counts as much as one on the
# server's. The builds alternate for $ROUNDS rounds so that the machine's drift hits them alike; the
# ratio that counts is one build's ops/s over another's within a round. One JSON line per point in $OUT:
# round, build, op, clients, ops/s, the driver's and the server's CPU per operation.
#
#   scripts/bench-ab-self.sh base=/tmp/nimbus-base head=/tmp/nimbus-head            # ~10 minutes
#   OPS=stat CLIENTS=64 ROUNDS=5 scripts/bench-ab-self.sh old=/tmp/nimbus-old head=/tmp/nimbus-head
set -euo pipefail
OUT="${OUT:-/tmp/nimbus-ab-self.jsonl}"
ADDR="${ADDR:-127.0.0.1:9881}"
FILES="${FILES:-50000}"
OPS="${OPS:-stat create mkdir ls delete rename}"
CLIENTS="${CLIENTS:-16,64}"
DURATION="${DURATION:-3s}"
ROUNDS="${ROUNDS:-3}"
DATA="$(mktemp -d)"
[[ $# -ge 2 ]] || { echo "usage: $0 NAME=BINARY NAME=BINARY..." >&2; exit 2; }

SERVER=""
stop_server() {
  [[ -n "$SERVER" ]] && { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true; }
  SERVER=""
}
trap 'stop_server; rm -rf "$DATA"' EXIT

: >"$OUT"
for round in $(seq "$ROUNDS"); do
  for nb in "$@"; do
    name=${nb%%=*} bin=${nb#*=}
    rm -rf "$DATA/store"
    "$bin" serve --data "$DATA/store" --listen "$ADDR" --log-level warn >"$DATA/serve.log" 2>&1 &
    SERVER=$!
    # Any HTTP answer: an older build may have no /readyz.
    for _ in $(seq 100); do curl -s -o /dev/null "http://$ADDR/" && break; sleep 0.1; done
    "$bin" bench prepare --target "nimbus://$ADDR" --files "$FILES" >"$DATA/prepare.log" 2>&1 \
      || { echo "$name: prepare failed: $(tail -3 "$DATA/prepare.log")" >&2; exit 1; }
    for op in $OPS; do
      "$bin" bench micro --target "nimbus://$ADDR" --op "$op" --clients "$CLIENTS" --duration "$DURATION" \
        --no-echo --files "$FILES" --json "$DATA/point.json" >/dev/null
      python3 - "$round" "$name" "$DATA/point.json" >>"$OUT" <<'PY'
import json, sys
for x in json.load(open(sys.argv[3]))["results"]:
    s = x.get("server") or {}
    print(json.dumps({"round": int(sys.argv[1]), "build": sys.argv[2], "op": x["op"], "clients": x["clients"],
                      "ops_s": round(x["throughput_ops_s"]), "driver_cpu_us_per_op": round(x.get("driver_cpu_us_per_op", 0), 2),
                      "server_cpu_us_per_op": round(s.get("cpu_us_per_op", 0), 2), "errors": x["errors"]}))
PY
    done
    stop_server
  done
done
# Per op and client count: each build's ops/s over the first's, round by round.
python3 - "$OUT" "${1%%=*}" <<'PY'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = sys.argv[2]
pts = collections.defaultdict(dict)
for r in rows:
    pts[(r["op"], r["clients"], r["round"])][r["build"]] = r
builds = list(dict.fromkeys(r["build"] for r in rows if r["build"] != base))
for op, c in sorted(set(k[:2] for k in pts)):
    for b in builds:
        rs = [v[b]["ops_s"] / max(v[base]["ops_s"], 1) for k, v in sorted(pts.items()) if k[:2] == (op, c) and b in v and base in v]
        if rs:
            print(f"{op:7s} {c:4d} clients  {b}/{base}: " + " ".join(f"{x:.2f}" for x in rs) + f"  median {statistics.median(rs):.2f}")
PY

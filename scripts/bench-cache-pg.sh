#!/usr/bin/env bash
# The caches' speed targets over PostgreSQL (docs/BENCHMARKS.md, "Caches and coherence"): two deployments of process instances (`nimbus serve --platform local --hosting process
# --deployments 2`, one instance each, always: the `disabled` profile's shape) on one private
# PostgreSQL cluster and one etcd member, with the metadata caches on (--cache-bytes $CACHE) and then
# off (0), each on a fresh database and tree, driven through the gateway with the hybrid client
# (`nimbus bench micro --hybrid`: after the first invocations, requests travel over the connections
# the instances open back, routed to the deployment that owns them). For each of $OPS at $CLIENTS:
# throughput and p50 with the caches on and off, and their ratios (targets: stat and read >= 5x with
# p50 <= 1/5; writes no more than 1.2x slower). Writes $OUT/cache-pg.json and $OUT/cache-pg.md.
#
#   scripts/bench-cache-pg.sh
#   OPS="stat create" CLIENTS="16" DURATION=5s scripts/bench-cache-pg.sh
#   MICRO_FLAGS="--straggler-factor -1" scripts/bench-cache-pg.sh   # flags added to every micro run
#
# About five minutes on 2 cores. Run it alone: everything shares the machine's cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OPS="${OPS:-stat read ls create mkdir}"
CLIENTS="${CLIENTS:-16 64}"
DURATION="${DURATION:-5s}"
FILES="${FILES:-10000}"
CACHE="${CACHE:-256m}"
OUT="${OUT:-$ROOT/docs/bench/cache-pg}"
WORK="${WORK:-/tmp/nimbus-bench-cache-pg}"
BIN="${BIN:-$WORK/nimbus}"
ADDR="${ADDR:-127.0.0.1:9886}"
export NIMBUS_PG_DIR="${NIMBUS_PG_DIR:-$WORK/pg}"
export NIMBUS_PG_PORT="${NIMBUS_PG_PORT:-56800}"
export NIMBUS_ETCD_DIR="${NIMBUS_ETCD_DIR:-$WORK/etcd}"
export NIMBUS_ETCD_PORT="${NIMBUS_ETCD_PORT:-52579}"

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
die() { echo "bench-cache-pg.sh: $*" >&2; exit 1; }

mkdir -p "$OUT" "$WORK"
chmod 755 "$WORK"
rm -f "$OUT"/raw-*.json
log "build"
GOFLAGS=-buildvcs=false go build -o "$BIN" ./cmd/nimbus

log "PostgreSQL and etcd"
# shellcheck source=scripts/pg-etcd-lib.sh
source scripts/pg-etcd-lib.sh
start_pg_etcd
clients_csv="${CLIENTS// /,}"

for cache in "$CACHE" 0; do
  label=on; [[ $cache == 0 ]] && label=off
  db="nimbus_cache_$label"
  log "caches $label: the gateway and two instances"
  serve_fresh "$db" "$WORK/serve-$label.log" --coordinator "$COORD/cache-$label-$$" --cache-bytes "$cache" \
    --platform local --hosting process --deployments 2 \
    --concurrency 1024 --min-instances 1 --max-instances-per-deployment 1 --max-instances 2
  "$BIN" bench prepare --target "nimbus://$ADDR" --hybrid --files "$FILES" >/dev/null
  settle_db "$db"
  for op in $OPS; do
    # shellcheck disable=SC2086
    "$BIN" bench micro --target "nimbus://$ADDR" --hybrid --op "$op" --clients "$clients_csv" --duration "$DURATION" ${MICRO_FLAGS:-} \
      --label "caches-$label" --json "$OUT/raw-$op-$label.json" >/dev/null ||
      log "$op with caches $label: some operations failed (the JSON counts them in errors)"
  done
  curl -sf "http://$ADDR/status/cluster" >"$WORK/cluster-$label.json" || true
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
  SERVER=""
done

log "table"
python3 - "$OUT" $OPS >"$OUT/cache-pg.md" <<'EOF'
import json, sys, glob
out, ops = sys.argv[1], sys.argv[2:]
res = {}
docs = []
for f in sorted(glob.glob(f"{out}/raw-*.json")):
    d = json.load(open(f))
    docs.append(d)
    for r in d["results"]:
        res[(r["op"], r["system"], r["clients"])] = r
json.dump({"schema": 1, "tool": "scripts/bench-cache-pg.sh", "results": [r for d in docs for r in d["results"]]}, open(f"{out}/cache-pg.json", "w"), indent=1)
print("| op | clients | caches on ops/s | caches off ops/s | on / off | p50 on ms | p50 off ms | p50 on / off | errors on / off |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for op in ops:
    for (o, s, c) in sorted(k for k in res if k[0] == op and k[1] == "caches-on"):
        on, off = res[(o, "caches-on", c)], res.get((o, "caches-off", c))
        if not off:
            continue
        t_on, t_off = on["throughput_ops_s"], off["throughput_ops_s"]
        p_on, p_off = on["latency_ms"]["p50"], off["latency_ms"]["p50"]
        print(f"| {op} | {c} | {t_on:,.0f} | {t_off:,.0f} | {t_on / t_off:.2f}x | {p_on:.3f} | {p_off:.3f} | {p_on / p_off:.2f} | {on['errors']} / {off['errors']} |")
EOF
cat "$OUT/cache-pg.md"
log "done: $OUT"

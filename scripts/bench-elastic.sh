#!/usr/bin/env bash
# The figures of docs/BENCHMARKS.md's "Elasticity (Figures 8 and 14)" and "Faults (Figure 15)",
# in one run on a private PostgreSQL and etcd (scripts/pg.sh,
# scripts/etcd.sh) behind `nimbus serve --platform local --hosting process --deployments 2
# --fault-injection`, every client a hybrid one (--hybrid) through the gateway:
#   1. `nimbus bench elastic`: the paper's mix at $BASE ops/s for $WARM, $STEP times that for
#      $BURST, then $IDLE with nothing offered (the gateway's --keep-alive $KEEP_ALIVE reclaims
#      what the burst started); instances per deployment over time, cold starts, the time to
#      serve 90% of the offered rate after the step, TCP against HTTP requests.
#   2. The fault run, `nimbus bench elastic --kill-every $KILL_EVERY --step 1`: the faults mix
#      (a third writes) at a constant $FAULT_RATE ops/s for $FAULT_FOR, one serving instance
#      SIGKILLed every $KILL_EVERY round robin over the deployments for the first $KILL_FOR (the
#      rest shows the recovery); then every acknowledged
#      create, mkdirs, rename and delete is checked against the namespace, errors betraying a
#      double application counted, and fsck run (the verdict in the JSON).
# Writes $OUT/elastic.json, $OUT/faults.json, the PNGs of `nimbus bench plot` and $OUT/load.txt
# (the load average before and after each run: the machine is shared).
#
#   scripts/bench-elastic.sh
#   FAULT_FOR=10s KILL_EVERY=2s SKIP_ELASTIC=1 OUT=/tmp/x scripts/bench-elastic.sh   (or SKIP_FAULTS=1)
#   SERVE_FLAGS="--coordinator-ttl 2s" ...     more flags for nimbus serve (and its instances)
#
# About five minutes on 2 cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BASE="${BASE:-100}"
STEP="${STEP:-8}"
WARM="${WARM:-10s}"
BURST="${BURST:-20s}"
IDLE="${IDLE:-30s}"
KEEP_ALIVE="${KEEP_ALIVE:-5s}"
FAULT_RATE="${FAULT_RATE:-200}"
FAULT_FOR="${FAULT_FOR:-140s}"
KILL_FOR="${KILL_FOR:-120s}"
KILL_EVERY="${KILL_EVERY:-2s}"
FILES="${FILES:-10000}"
# Each instance opens up to PG_POOL (+2) connections; pg.sh allows 200, and the platform runs up to
# 16 instances (the default 32 each ran out: "too many clients").
PG_POOL="${PG_POOL:-8}"
OUT="${OUT:-$ROOT/docs/bench/elastic}"
WORK="${WORK:-/tmp/nimbus-bench-elastic}"
BIN="${BIN:-$WORK/nimbus}"
ADDR="${ADDR:-127.0.0.1:9891}"
export NIMBUS_PG_DIR="${NIMBUS_PG_DIR:-$WORK/pg}"
export NIMBUS_PG_PORT="${NIMBUS_PG_PORT:-56600}"
export NIMBUS_ETCD_DIR="${NIMBUS_ETCD_DIR:-$WORK/etcd}"
export NIMBUS_ETCD_PORT="${NIMBUS_ETCD_PORT:-56700}"

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
die() { echo "bench-elastic.sh: $*" >&2; exit 1; }
load() { echo "$(date -u +%H:%M:%S) $1: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load.txt"; }

mkdir -p "$OUT" "$WORK"
chmod 755 "$WORK"
echo "# $(date -u +%FT%TZ) scripts/bench-elastic.sh (load average 1, 5, 15 min)" >>"$OUT/load.txt"

log "build"
GOFLAGS=-buildvcs=false go build -o "$BIN" ./cmd/nimbus

log "PostgreSQL and etcd"
# shellcheck source=scripts/pg-etcd-lib.sh
source scripts/pg-etcd-lib.sh
start_pg_etcd
DB_URL="$PG_BASE/nimbus_elastic?sslmode=disable"
psql -q "$URL" -c 'DROP DATABASE IF EXISTS nimbus_elastic' -c 'CREATE DATABASE nimbus_elastic'

log "the gateway on $ADDR"
rm -rf "$WORK/data"
"$BIN" serve --platform local --hosting process --deployments 2 --store "$DB_URL" --coordinator "$COORD" \
  --cache-bytes 64m --pg-pool-size "$PG_POOL" --keep-alive "$KEEP_ALIVE" --fault-injection ${SERVE_FLAGS:-} \
  --data "$WORK/data" --listen "$ADDR" --log-level warn >"$WORK/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do curl -sf "http://$ADDR/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "http://$ADDR/readyz" >/dev/null || die "the gateway did not start: $(tail -3 "$WORK/serve.log")"

T="nimbus://$ADDR"
log "prepare $FILES files"
"$BIN" bench prepare --target "$T" --hybrid --files "$FILES" >/dev/null

if [[ -z "${SKIP_ELASTIC:-}" ]]; then
  log "elastic: $BASE ops/s x$STEP for $BURST after $WARM, then $IDLE idle"
  sleep "${KEEP_ALIVE%s}" # the prepare's instances reclaimed first
  load "before elastic"
  "$BIN" bench elastic --target "$T" --hybrid --base-rate "$BASE" --step "$STEP" --warm "$WARM" \
    --burst "$BURST" --idle "$IDLE" --json "$OUT/elastic.json" | tee "$OUT/elastic.txt" || true
  load "after elastic"
fi

code=0
if [[ -z "${SKIP_FAULTS:-}" ]]; then
  log "faults: $FAULT_RATE ops/s for $FAULT_FOR, an instance killed every $KILL_EVERY for $KILL_FOR"
  load "before faults"
  "$BIN" bench elastic --target "$T" --hybrid --mix faults --base-rate "$FAULT_RATE" --step 1 --warm 0s \
    --burst "$FAULT_FOR" --idle 0s --kill-every "$KILL_EVERY" --kill-for "$KILL_FOR" --json "$OUT/faults.json" | tee "$OUT/faults.txt" || code=$?
  load "after faults"
  curl -sf "http://$ADDR/metrics" | grep -E '^nimbus_(platform_(crashes|cold_starts)_total|gateway_requests_total)' >"$OUT/gateway-metrics.txt" || true
fi

log "plot"
files=()
[[ -f "$OUT/elastic.json" ]] && files+=("$OUT/elastic.json")
[[ -f "$OUT/faults.json" ]] && files+=("$OUT/faults.json")
"$BIN" bench plot "${files[@]}" --out "$OUT"
log "done (fault run exit $code)"
exit "$code"

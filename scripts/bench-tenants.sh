#!/usr/bin/env bash
# scripts/bench-tenants.sh — a tenant's latency beside a runaway job, with
# and without --tenant-limit.
#
# One fresh `nimbus serve` per case on a prepared tree; alice runs
# `nimbus bench micro --op stat --clients 16` for DURATION while, in two of
# the three cases, mallory's job "flood" runs the same with 64 clients:
#   alone      alice only
#   flood      the flood, no limit
#   limited    the flood, --tenant-limit mallory/flood=LIMIT
# Results: $OUT/{alone,flood,limited}.json (alice) and a summary on stdout.
set -euo pipefail
DURATION=${DURATION:-10s}
LIMIT=${LIMIT:-200}
OUT=${OUT:-/tmp/bench-tenants}
BIN=${BIN:-$(mktemp -d)/nimbus}
[[ -x $BIN ]] || go build -o "$BIN" ./cmd/nimbus
mkdir -p "$OUT"
addr=127.0.0.1:19881

run_case() {
  local name=$1 flood=$2; shift 2
  local data; data=$(mktemp -d)
  "$BIN" serve --data "$data" --listen $addr --log-level warn "$@" >"$OUT/$name.serve.log" 2>&1 &
  local pid=$!
  for _ in $(seq 50); do curl -sf "http://$addr/readyz" >/dev/null && break; sleep 0.1; done
  "$BIN" bench prepare --target nimbus://$addr --files 10000 >/dev/null 2>&1
  local fpid=""
  if [[ $flood == yes ]]; then
    "$BIN" bench micro --target nimbus://$addr --user mallory --job flood --op stat --clients 64 \
      --duration 30s --no-echo --warmup 0s >"$OUT/$name.flood.out" 2>&1 &
    fpid=$!
    sleep 1
  fi
  "$BIN" bench micro --target nimbus://$addr --user alice --op stat --clients 16 --duration "$DURATION" \
    --no-echo --json "$OUT/$name.json" >"$OUT/$name.out" 2>&1
  [[ -n $fpid ]] && { kill $fpid 2>/dev/null || true; wait $fpid 2>/dev/null || true; }
  NIMBUS_ADDR=http://$addr "$BIN" status --tenants >"$OUT/$name.tenants" 2>&1 || true
  kill $pid; wait $pid 2>/dev/null || true
  rm -rf "$data"
}

run_case alone no
run_case flood yes
run_case limited yes --tenant-limit "mallory/flood=$LIMIT"

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def r(n):
    d = json.load(open(f"{out}/{n}.json"))["results"][-1]
    return d["throughput_ops_s"], d["latency_ms"]["p50"], d["latency_ms"]["p99"]
base = r("alone")
print(f"{'case':8} {'alice ops/s':>12} {'p50 ms':>8} {'p99 ms':>8} {'p50 vs alone':>13}")
for n in ("alone", "flood", "limited"):
    ops, p50, p99 = r(n)
    print(f"{n:8} {ops:12.0f} {p50:8.3f} {p99:8.3f} {p50/base[1]:12.2f}x")
PY
for n in flood limited; do echo "== tenants, $n"; cat "$OUT/$n.tenants"; done

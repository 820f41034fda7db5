#!/usr/bin/env bash
# The λFS evaluation's comparison on this machine (docs/BENCHMARKS.md "The paper's
# evaluation: every profile on one Spotify run"): every baseline profile of `nimbus bench --profile`
# on the same Spotify run (same seed, same tree, same rates), side by side.
#
# One private PostgreSQL cluster and one etcd member (scripts/pg.sh, scripts/etcd.sh). For each
# profile, a fresh database and a fresh etcd prefix; the server is started with the profile's flags
# (`nimbus bench spotify --profile P` prints them when it has no --target, which is where they are
# read from):
#   hopsfs, hopsfs-cache   one `nimbus serve --store postgres://...` (the fixed pool of one)
#   lambda, limited, disabled, http-only
#                          `nimbus serve --platform local --hosting process` (the gateway) with the
#                          profile's flags, reached with the hybrid client
# then `nimbus bench prepare` of $FILES files and `nimbus bench spotify --profile P` of $DURATION at
# $BASE_RATE ops/s (Pareto bursts up to 7x, 15 s intervals, seed $SEED). Writes
# $OUT/profile-P.json, $OUT/profiles.md (the table) and the charts of `nimbus bench plot`.
#
#   scripts/bench-profiles.sh
#   PROFILES="hopsfs lambda" DURATION=30s BASE_RATE=500 scripts/bench-profiles.sh
#
# About 2 minutes per profile at the defaults. Run it alone: everything shares the two cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PROFILES="${PROFILES:-hopsfs hopsfs-cache lambda limited disabled http-only}"
DURATION="${DURATION:-60s}"
BASE_RATE="${BASE_RATE:-1000}"
SEED="${SEED:-1}"
FILES="${FILES:-10000}"
WORKERS="${WORKERS:-128}"
OUT="${OUT:-$ROOT/docs/bench/profiles}"
WORK="${WORK:-/tmp/nimbus-bench-profiles}"
BIN="${BIN:-$WORK/nimbus}"
ADDR="${ADDR:-127.0.0.1:9885}"
export NIMBUS_PG_DIR="${NIMBUS_PG_DIR:-$WORK/pg}"
export NIMBUS_PG_PORT="${NIMBUS_PG_PORT:-56700}"
export NIMBUS_ETCD_DIR="${NIMBUS_ETCD_DIR:-$WORK/etcd}"
export NIMBUS_ETCD_PORT="${NIMBUS_ETCD_PORT:-52479}"

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
die() { echo "bench-profiles.sh: $*" >&2; exit 1; }

mkdir -p "$OUT" "$WORK"
chmod 755 "$WORK"
log "build"
GOFLAGS=-buildvcs=false go build -o "$BIN" ./cmd/nimbus

log "PostgreSQL and etcd"
# shellcheck source=scripts/pg-etcd-lib.sh
source scripts/pg-etcd-lib.sh
start_pg_etcd

for p in $PROFILES; do
  flags="$(profile_flags "$p")"
  [[ -n "$flags" ]] || die "no flags for profile $p"
  db="nimbus_prof_${p//-/_}"
  log "profile $p: nimbus serve $flags"
  # shellcheck disable=SC2086
  serve_fresh "$db" "$WORK/serve-$p.log" --coordinator "$COORD/prof-$p-$$" --pg-pool-size 16 $flags
  "$BIN" bench prepare --target "nimbus://$ADDR" --files "$FILES" --profile "$p" >/dev/null
  settle_db "$db"
  "$BIN" bench spotify --target "nimbus://$ADDR" --profile "$p" --duration "$DURATION" --base-rate "$BASE_RATE" \
    --seed "$SEED" --workers "$WORKERS" --json "$OUT/profile-$p.json" | tail -3 ||
    log "profile $p: some operations failed (the JSON counts them in errors)"
  curl -sf "http://$ADDR/status/cluster" >"$WORK/cluster-$p.json" || true
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
  SERVER=""
done

log "table"
python3 - "$OUT" $PROFILES >"$OUT/profiles.md" <<'EOF'
import json, sys
out, profiles = sys.argv[1], sys.argv[2:]
rows = []
for p in profiles:
    doc = json.load(open(f"{out}/profile-{p}.json"))
    r = doc["results"][0]
    sp = r.get("spotify") or {}
    c = sp.get("cost") or {}
    rows.append((p, r, sp, c))
print("| profile | offered ops/s | served ops/s | p50 ms | p99 ms | response p99 ms | server behind (s) | errors | instances max | cost USD | ops per USD | serverful USD |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for p, r, sp, c in rows:
    lat, resp = r["latency_ms"], sp.get("response_ms", {})
    print(f"| {p} | {sp.get('offered_ops_s', 0):.0f} | {r['throughput_ops_s']:.0f} | {lat['p50']:.3f} | {lat['p99']:.3f} | "
          f"{resp.get('p99', 0):.1f} | {sp.get('server_behind_s', 0)} | {r['errors']} | {c.get('instances_max', '–')} | "
          f"{c.get('cost_usd', 0):.6f} | {c.get('perf_per_dollar', 0):.3g} | {c.get('serverful_cost_usd', 0):.6f} |")
base = {p: (r, c) for p, r, sp, c in rows}
if "lambda" in base and "hopsfs-cache" in base:
    (lr, lc), (hr, hc) = base["lambda"], base["hopsfs-cache"]
    if lc.get("cost_usd") and hc.get("serverful_cost_usd"):
        print()
        print(f"lambda's serverless cost against hopsfs-cache's serverful cost: {100 * (lc['cost_usd'] / hc['serverful_cost_usd'] - 1):+.1f}% "
              f"(λFS: -85.99%); performance per dollar {lc['perf_per_dollar'] / hc['serverful_perf_per_dollar']:.2f}x (λFS: 3.33x)")
    # The most any serverless hosting of this run's work could save: hopsfs-cache's one
    # NameNode billed for its own active time only (no invocation charge, no second instance),
    # against the same NameNode billed for the whole run. A serverless profile spreads the work
    # over at least one instance per deployment, each billed while any request is under way on
    # it, so its active time is at least this one's, less what overlaps.
    if hc.get("active_s") and hc.get("instances_max"):
        bound = hr["duration_s"] * hc["instances_max"] / hc["active_s"]
        print(f"bound: hopsfs-cache's NameNode was active {hc['active_s']:.2f} s of {hr['duration_s']:.0f} s; "
              f"billed for that alone it would serve {bound:.2f}x the operations per dollar of its serverful bill")
EOF
"$BIN" bench plot --out "$OUT" "$OUT"/profile-*.json >/dev/null
cat "$OUT/profiles.md"
log "done: $OUT"

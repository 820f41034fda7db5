#!/usr/bin/env bash
# How far the Spotify mix goes on this machine (the target: 40,000 ops/s sustained
# with the lambda profile; docs/BENCHMARKS.md "The Spotify mix's ceiling"). One private PostgreSQL
# cluster and one etcd member (scripts/pg-etcd-lib.sh); one `nimbus serve` with the profile's flags
# ($PROFILE, default lambda: the local platform, process instances, scaling on) on a fresh database
# and a $FILES-file tree; then `nimbus bench spotify --max-burst 1` (a constant offered rate, no
# Pareto bursts) for $DURATION at each of $RATES, and the same at the last rate with `--mix echo`
# (no-ops over the same connections: how far the driver and the transport go with no metadata
# work). Around each run, the CPU of PostgreSQL, the instances and the gateway from /proc
# (scripts/proc-cpu.py), per operation served, beside the driver's own: what the mix costs the
# machine, and so how many cores a rate would take. Writes $OUT/ceiling-RATE.json (and
# ceiling-RATE-cpu.json), $OUT/ceiling-echo.json and $OUT/ceiling.md.
#
#   scripts/bench-spotify-ceiling.sh
#   RATES="10000 20000" DURATION=15s PROFILE=disabled scripts/bench-spotify-ceiling.sh
#
# About 3 minutes at the defaults. Run it alone: everything shares the two cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PROFILE="${PROFILE:-lambda}"
RATES="${RATES:-5000 10000 20000 30000 40000}"
DURATION="${DURATION:-20s}"
MIX="${MIX:-paper}"
FILES="${FILES:-10000}"
WORKERS="${WORKERS:-256}"
OUT="${OUT:-$ROOT/docs/bench/ceiling}"
WORK="${WORK:-/tmp/nimbus-bench-ceiling}"
BIN="${BIN:-$WORK/nimbus}"
ADDR="${ADDR:-127.0.0.1:9884}"
export NIMBUS_PG_DIR="${NIMBUS_PG_DIR:-$WORK/pg}"
export NIMBUS_PG_PORT="${NIMBUS_PG_PORT:-56600}"
export NIMBUS_ETCD_DIR="${NIMBUS_ETCD_DIR:-$WORK/etcd}"
export NIMBUS_ETCD_PORT="${NIMBUS_ETCD_PORT:-52379}"

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
die() { echo "bench-spotify-ceiling.sh: $*" >&2; exit 1; }

mkdir -p "$OUT" "$WORK"
chmod 755 "$WORK"
rm -f "$OUT"/ceiling-*.json
log "build"
GOFLAGS=-buildvcs=false go build -o "$BIN" ./cmd/nimbus

log "PostgreSQL and etcd"
# shellcheck source=scripts/pg-etcd-lib.sh
source scripts/pg-etcd-lib.sh
start_pg_etcd

flags="$(profile_flags "$PROFILE")"
[[ -n "$flags" ]] || die "no flags for profile $PROFILE"
log "profile $PROFILE: nimbus serve $flags"
# shellcheck disable=SC2086
serve_fresh nimbus_ceiling "$WORK/serve.log" --coordinator "$COORD/ceiling-$$" --pg-pool-size 16 $flags
"$BIN" bench prepare --target "nimbus://$ADDR" --files "$FILES" --profile "$PROFILE" >/dev/null
settle_db nimbus_ceiling
last=""
# cpu_per_op NAME: the servers' CPU per operation served during the last run, by process
# (scripts/proc-cpu.py), written beside its JSON.
cpu_per_op() {
  local ops
  ops=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["ops"])' "$OUT/ceiling-$1.json")
  scripts/proc-cpu.py --delta "$WORK/cpu-before.json" "$WORK/cpu-after.json" "$ops" >"$OUT/ceiling-$1-cpu.json"
}
for rate in $RATES; do
  log "$MIX at $rate ops/s"
  scripts/proc-cpu.py >"$WORK/cpu-before.json"
  "$BIN" bench spotify --target "nimbus://$ADDR" --profile "$PROFILE" --mix "$MIX" --duration "$DURATION" --interval "$DURATION" \
    --base-rate "$rate" --max-burst 1 --seed 1 --workers "$WORKERS" --json "$OUT/ceiling-$rate.json" | tail -2 ||
    log "$MIX at $rate ops/s: some operations failed (the JSON counts them in errors)"
  scripts/proc-cpu.py >"$WORK/cpu-after.json"
  cpu_per_op "$rate"
  last=$rate
done
log "echo at $last ops/s"
scripts/proc-cpu.py >"$WORK/cpu-before.json"
"$BIN" bench spotify --target "nimbus://$ADDR" --profile "$PROFILE" --mix echo --duration "$DURATION" --interval "$DURATION" \
  --base-rate "$last" --max-burst 1 --seed 1 --workers "$WORKERS" --json "$OUT/ceiling-echo.json" | tail -2 ||
  log "echo at $last ops/s: some operations failed (the JSON counts them in errors)"
scripts/proc-cpu.py >"$WORK/cpu-after.json"
cpu_per_op echo
curl -sf "http://$ADDR/status/cluster" >"$OUT/cluster.json" || true

log "table"
python3 - "$OUT" $RATES <<'PY' >"$OUT/ceiling.md"
import json, sys
out, rates = sys.argv[1], sys.argv[2:]
print("| mix | offered ops/s | served ops/s | served / offered | p50 ms | p99 ms | response p99 ms | seconds behind (server / driver) "
      "| CPU µs/op: PostgreSQL / instances / gateway / driver | cores per 10,000 ops/s | instances max | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|")
for name in rates + ["echo"]:
    doc = json.load(open(f"{out}/ceiling-{name}.json"))
    r = doc["results"][0]
    sp = r.get("spotify") or {}
    c = sp.get("cost") or {}
    lat, resp = r["latency_ms"], sp.get("response_ms", {})
    offered = sp.get("offered_ops_s", 0)
    mix = "echo" if name == "echo" else sp.get("mix", "paper")
    # The servers' CPU per operation (proc-cpu.py, over the run) and the driver's own; their sum
    # is the machine's work per operation: what 10,000 ops/s take in cores (this machine has 2).
    try:
        cpu = json.load(open(f"{out}/ceiling-{name}-cpu.json"))
    except OSError:
        cpu = {}
    drv = r.get("driver_cpu_us_per_op", 0)
    parts = [cpu.get("postgres", 0), cpu.get("instances", 0), cpu.get("gateway", 0), drv]
    cores = sum(parts) * 10_000 / 1e6
    print(f"| {mix} | {offered:,.0f} | {r['throughput_ops_s']:,.0f} | {r['throughput_ops_s'] / offered if offered else 0:.2f} | "
          f"{lat['p50']:.3f} | {lat['p99']:.3f} | {resp.get('p99', 0):.1f} | {sp.get('server_behind_s', 0)} / {sp.get('driver_behind_s', 0)} | "
          f"{' / '.join(f'{x:.1f}' for x in parts)} | {cores:.2f} | {c.get('instances_max', '–')} | {r['errors']} |")
PY
cat "$OUT/ceiling.md"
log "done: $OUT"

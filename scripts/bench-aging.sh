#!/usr/bin/env bash
# What a long-lived server pays per operation: the server CPU of rename, delete (64 clients) and
# stat (32 clients) over the RPC on a fresh server, then again after the server has run the compare
# stage's sequence (every operation at 1 to 256 clients, twice), with a CPU profile of that last
# rename run. docs/BENCHMARKS.md ("A long-lived server") has a run of it.
#
#   scripts/bench-aging.sh                 # ~8 minutes with the default DURATION
#   DURATION=2s scripts/bench-aging.sh     # shorter aging
#   AGING=quick scripts/bench-aging.sh     # ~3 minutes: age with creates and mkdirs at 256 clients
#                                          # only ($QUICK each, default 20s), which grow the namespace
#
# Output: one line per measured point (ops/s, driver and server CPU per operation), and in $OUT
# the aged server's /metrics, its rename profile (aged-rename.cpu.pprof) and the data directory's size.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OUT="${OUT:-/tmp/nimbus-aging}"
BIN="${BIN:-$OUT/nimbus}"
ADDR="${ADDR:-127.0.0.1:9880}"
FILES="${FILES:-50000}"
DURATION="${DURATION:-4s}"
SERVE_ARGS="${SERVE_ARGS:-}"
AGING="${AGING:-full}"
QUICK="${QUICK:-20s}"

mkdir -p "$OUT"
go build -o "$BIN" ./cmd/nimbus
# shellcheck source=scripts/bench-lib.sh
source "$ROOT/scripts/bench-lib.sh"
trap stop_server EXIT
# shellcheck disable=SC2086 # SERVE_ARGS is a list of flags
start_server "$BIN" serve $SERVE_ARGS
prepare_tree

# run LABEL OP CLIENTS DURATION: one measured point, printed as one line
run() {
  "$BIN" bench micro --target "nimbus://$ADDR" --op "$2" --clients "$3" --duration "$4" --no-echo --json "$OUT/point.json" >/dev/null
  print_point "$1" "$OUT/point.json"
}

run fresh rename 64 8s
run fresh delete 64 8s
run fresh stat 32 8s
if [ "$AGING" = quick ]; then
  echo "aging: create and mkdir at 256 clients, $QUICK each ..."
  for op in create mkdir; do
    "$BIN" bench micro --target "nimbus://$ADDR" --op "$op" --clients 256 --duration "$QUICK" --no-echo >/dev/null
  done
else
  echo "aging: every operation at 1 to 256 clients, twice, $DURATION each ..."
  for op in stat read ls create mkdir delete rename chmod; do
    for c in 1 4 16 64 256; do
      for _ in 1 2; do
        "$BIN" bench micro --target "nimbus://$ADDR" --op "$op" --clients "$c" --duration "$DURATION" --no-echo >/dev/null
      done
    done
  done
fi
curl -sf "http://$ADDR/metrics" >"$OUT/aged.metrics"
curl -sf -o "$OUT/aged-rename.cpu.pprof" "http://$DEBUG_ADDR/debug/pprof/profile?seconds=7" &
PROF=$!
run aged rename 64 8s
wait "$PROF"
run aged delete 64 8s
run aged stat 32 8s
echo "data directory: $(du -sh "$OUT/data" | cut -f1); profile: go tool pprof -top $BIN $OUT/aged-rename.cpu.pprof"

#!/usr/bin/env bash
# A/B of two commits in one run: Nimbus built at $BASE and at HEAD, each served fresh, the bench
# tree of $FILES files prepared, then every op of $OPS at $CLIENTS clients over the RPC, the two
# builds alternating for $ROUNDS rounds so that the machine's drift hits both alike. Each point
# prints ops/s, the server's CPU per operation and the driver's; the JSON is kept in $OUT. The
# ratio that counts is HEAD's ops/s over BASE's within a round, not either figure alone.
#
#   BASE=1139934 scripts/bench-ab.sh                      # ~4 minutes
#   BASE=v1 OPS="stat create" CLIENTS=16 ROUNDS=3 scripts/bench-ab.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BASE="${BASE:?set BASE to the commit to compare HEAD with}"
OUT="${OUT:-/tmp/nimbus-ab}"
ADDR="${ADDR:-127.0.0.1:9880}"
FILES="${FILES:-50000}"
OPS="${OPS:-stat create ls}"
CLIENTS="${CLIENTS:-64}"
DURATION="${DURATION:-4s}"
ROUNDS="${ROUNDS:-2}"
DEBUG_ADDR="" # an older build may not know --debug-addr

mkdir -p "$OUT"
src="$OUT/base-src"
rm -rf "$src" && mkdir -p "$src"
git archive "$BASE" | tar -x -C "$src"
(cd "$src" && go build -o "$OUT/nimbus-base" ./cmd/nimbus)
go build -o "$OUT/nimbus-head" ./cmd/nimbus
rm -rf "$src"
BIN="$OUT/nimbus-head" # the driver: one build drives both servers
# shellcheck source=scripts/bench-lib.sh
source "$ROOT/scripts/bench-lib.sh"
trap stop_server EXIT

echo "A/B: base $(git rev-parse --short "$BASE") against head $(git rev-parse --short HEAD), $CLIENTS clients, $DURATION per point"
for round in $(seq "$ROUNDS"); do
  for side in base head; do
    start_server "$OUT/nimbus-$side" serve
    prepare_tree
    for op in $OPS; do
      js="$OUT/$op-$side-r$round.json"
      "$BIN" bench micro --target "nimbus://$ADDR" --op "$op" --clients "$CLIENTS" --duration "$DURATION" \
        --no-echo --json "$js" >/dev/null
      print_point "$side r$round" "$js"
    done
    stop_server
  done
done

#!/usr/bin/env bash
# How the server scales with cores on this 2-core machine: Nimbus over its RPC, each operation at
# $CLIENTS clients, in three layouts, one after the other, $ROUNDS rounds:
#
#   1        the server pinned to CPU 1 (taskset) with its default processors (`nimbus serve` runs
#            with two Go Ps where the runtime's default is one), the driver pinned to CPU 0 with
#            GOMAXPROCS=1: the driver cannot take the server's core, so the figure is what one core
#            of server does
#   1-1p     the same with the server at GOMAXPROCS=1: what that second P is worth
#   2        server and driver unpinned (the server at its default, 2 Ps), sharing both cores as in
#            every other benchmark here
#   2-3p     the same with the server at GOMAXPROCS=3 (not in the default list)
#
# A fresh server per layout and round (the tree of $FILES files prepared first). Each point prints
# ops/s, the server's CPU per operation and the driver's; the JSON of every point is kept in $OUT.
# docs/BENCHMARKS.md ("Cores") has a run of it.
#
#   scripts/bench-cores.sh                            # ~5 minutes
#   LAYOUTS="1 2" OPS="stat create" CLIENTS=16 scripts/bench-cores.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OUT="${OUT:-/tmp/nimbus-cores}"
BIN="${BIN:-$OUT/nimbus}"
ADDR="${ADDR:-127.0.0.1:9880}"
FILES="${FILES:-50000}"
OPS="${OPS:-stat read ls create mkdir delete rename}"
CLIENTS="${CLIENTS:-64}"
DURATION="${DURATION:-4s}"
ROUNDS="${ROUNDS:-2}"
LAYOUTS="${LAYOUTS:-1 1-1p 2}"
command -v taskset >/dev/null || { echo "bench-cores: needs taskset (util-linux)" >&2; exit 1; }
[[ "$(nproc)" -ge 2 ]] || { echo "bench-cores: needs 2 CPUs" >&2; exit 1; }

mkdir -p "$OUT"
go build -o "$BIN" ./cmd/nimbus
# shellcheck source=scripts/bench-lib.sh
source "$ROOT/scripts/bench-lib.sh"
trap stop_server EXIT

# layout LAYOUT ROUND: a fresh server in LAYOUT (1, 1-1p, 2 or 2-3p), the tree, then every op once.
layout() {
  local cores="$1" round="$2" srv=() drv=()
  case "$cores" in
    1) srv=(taskset -c 1); drv=(env GOMAXPROCS=1 taskset -c 0) ;;
    1-1p) srv=(env GOMAXPROCS=1 taskset -c 1); drv=(env GOMAXPROCS=1 taskset -c 0) ;;
    2) ;;
    2-3p) srv=(env GOMAXPROCS=3) ;;
    *) echo "bench-cores: unknown layout $cores (want 1, 1-1p, 2 or 2-3p)" >&2; exit 2 ;;
  esac
  start_server "${srv[@]}" "$BIN" serve
  prepare_tree "${drv[@]}"
  for op in $OPS; do
    local js="$OUT/$op-cores$cores-r$round.json"
    "${drv[@]}" "$BIN" bench micro --target "nimbus://$ADDR" --op "$op" --clients "$CLIENTS" --duration "$DURATION" \
      --no-echo --json "$js" >/dev/null
    print_point "$cores r$round" "$js"
  done
  stop_server
}

for round in $(seq 1 "$ROUNDS"); do
  for l in $LAYOUTS; do
    layout "$l" "$round"
  done
done

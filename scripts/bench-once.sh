#!/usr/bin/env bash
# What exactly once costs: one nimbus binary, a fresh `nimbus serve` per run with duplicate
# detection on (the default) and off (--request-ttl 0), `nimbus bench micro` create and mkdir at
# $CLIENTS clients over the RPC (whose client gives every write a request id), $ROUNDS rounds
# interleaved. Each line is `nimbus bench micro`'s: ops/s, latencies, and last the server's own
# CPU per operation. docs/BENCHMARKS.md ("Exactly once") has a run of it.
#
#   scripts/bench-once.sh                       # ~4 minutes
#   NIMBUS=/tmp/nimbus ROUNDS=1 OPS=create scripts/bench-once.sh
set -euo pipefail
NIMBUS=${NIMBUS:-nimbus}
ROUNDS=${ROUNDS:-3}
OPS=${OPS:-"create mkdir"}
CLIENTS=${CLIENTS:-16,64}
DURATION=${DURATION:-4s}
ADDR=${ADDR:-127.0.0.1:19871}
for round in $(seq "$ROUNDS"); do
  for mode in on off; do
    d=$(mktemp -d)
    extra=()
    [ "$mode" = off ] && extra=(--request-ttl 0)
    "$NIMBUS" serve --data "$d" --listen "$ADDR" --superuser "$(id -un)" "${extra[@]}" >"$d/log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://$ADDR/readyz" >/dev/null && break; sleep 0.1; done
    for op in $OPS; do
      echo "== round $round $mode $op"
      "$NIMBUS" bench micro --target "nimbus://$ADDR" --op "$op" --clients "$CLIENTS" \
        --duration "$DURATION" --files 2000 --no-echo | grep -E '^ +micro' || true
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$d"
  done
done

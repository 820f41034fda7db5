# Sourced by scripts/bench-aging.sh and scripts/bench-cores.sh: a fresh Nimbus server on $ADDR with
# its data in $OUT/data, the bench tree of $FILES files, and one measured point printed as one line.
# The sourcing script sets OUT, BIN, ADDR and FILES; DEBUG_ADDR (default 127.0.0.1:6060; empty: none) is where the
# server serves /debug/pprof/.

DEBUG_ADDR="${DEBUG_ADDR-127.0.0.1:6060}"

SERVER=""

# start_server CMD...: runs CMD (`$BIN serve` and its flags, behind env or taskset if need be) in the
# background on a fresh $OUT/data, and waits until it is ready; its pid is in SERVER.
start_server() {
  rm -rf "$OUT/data"
  "$@" --data "$OUT/data" --listen "$ADDR" ${DEBUG_ADDR:+--debug-addr "$DEBUG_ADDR"} --log-level warn >"$OUT/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 100); do curl -sf "http://$ADDR/readyz" >/dev/null && break; sleep 0.1; done
  curl -sf "http://$ADDR/readyz" >/dev/null \
    || { echo "$(basename "$0"): server did not start: $(tail -3 "$OUT/serve.log")" >&2; exit 1; }
}

# stop_server: stops the server start_server started, if it runs.
stop_server() {
  [[ -n "$SERVER" ]] && { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true; }
  SERVER=""
}

# prepare_tree [PREFIX...]: the tree of $FILES files, the driver run behind PREFIX (env, taskset).
prepare_tree() {
  "$@" "$BIN" bench prepare --target "nimbus://$ADDR" --files "$FILES" >"$OUT/prepare.log" 2>&1
}

# print_point LABEL JSON: the first result of a `nimbus bench micro --json` document as one line.
print_point() {
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))["results"][0]
s = r.get("server") or {}
print(f"{sys.argv[1]:10s} {r['op']:7s} {r['clients']:4d} clients {r['throughput_ops_s']:9.0f} ops/s"
      f"  driver {r.get('driver_cpu_us_per_op', 0):6.1f} µs/op  server {s.get('cpu_us_per_op', 0):6.1f} µs/op  errors {r['errors']}")
PY
}

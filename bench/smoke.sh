#!/usr/bin/env bash
# bench/smoke.sh: run every `nimbus bench` workload for a couple of seconds
# and check the JSON each one writes. It checks shape, never speed.
#
#   bench/smoke.sh                          # a fresh embedded Nimbus per workload
#   TARGET=webhdfs://127.0.0.1:9871 bench/smoke.sh   # any target
#
# Environment: NIMBUS (a built binary; default: build ./cmd/nimbus into the
# work dir), TARGET (default: embedded), SECS (per run, default 2), OUT (keep
# JSON and PNGs there; default: a temporary directory removed at the end).
set -euo pipefail

cd "$(dirname "$0")/.."
SECS=${SECS:-2}
TARGET=${TARGET:-}
work=$(mktemp -d)
OUT=${OUT:-}
if [[ -z "$OUT" ]]; then
  OUT=$work/out
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$OUT"
if [[ -z "${NIMBUS:-}" ]]; then
  NIMBUS=$work/nimbus
  go build -o "$NIMBUS" ./cmd/nimbus
fi
command -v python3 >/dev/null || { echo "smoke: python3 is needed to check the JSON" >&2; exit 1; }

targs=()
[[ -n "$TARGET" ]] && targs=(--target "$TARGET")
failed=0

# check FILE WORKLOAD OP...: the document parses, every required field is
# there and sane, and each listed op has a result with operations and no errors.
check() {
  local file=$1 workload=$2; shift 2
  python3 - "$file" "$workload" "$@" <<'PY' || return 1
import json, sys
path, workload, ops = sys.argv[1], sys.argv[2], sys.argv[3:]
doc = json.load(open(path))
assert doc["schema"] == 1, "schema"
res = doc["results"]
assert res, "no results"
need = ["workload", "op", "target", "system", "clients", "throughput_ops_s",
        "latency_ms", "ops", "errors", "duration_s", "series"]
for r in res:
    for k in need:
        assert k in r, f"{r.get('op')}: missing {k}"
    l = r["latency_ms"]
    for k in ["p50", "p90", "p99", "p999", "max"]:
        assert k in l, f"latency_ms.{k} missing"
    if r["ops"] > 0:
        assert l["p50"] <= l["p90"] <= l["p99"] <= l["p999"] <= l["max"], f"{r['op']}: percentiles out of order {l}"
        assert r["throughput_ops_s"] > 0, f"{r['op']}: ops but no throughput"
    assert sum(p["ops"] for p in r["series"]) == r["ops"], f"{r['op']}: series does not sum to ops"
    assert r["errors"] == 0, f"{r['op']}: {r['errors']} errors: {r.get('error_samples')}"
for op in ops:
    got = [r for r in res if r["op"] == op and r["workload"] in (workload, "echo")]
    assert got, f"no result for op {op}"
    assert all(r["ops"] > 0 for r in got), f"{op}: no operations"
    if workload == "micro" and op != "echo":
        assert all(r.get("echo_fraction", 0) > 0 for r in got), f"{op}: no echo_fraction"
    if workload in ("micro", "echo"):
        for r in got:
            assert r.get("driver_cpu_us_per_op", 0) > 0, f"{op}: no driver_cpu_us_per_op"
            srv = r.get("server")
            assert srv and srv["cpu_s"] >= 0 and not r.get("server_error"), f"{op}: server counters: {srv} {r.get('server_error')}"
            # the embedded target is a real Nimbus with its store (a TARGET may be the fake server)
            if op in ("create", "mkdir", "delete", "rename", "chmod") and r["target"] == "embedded":
                assert srv.get("commits", 0) > 0 and srv.get("log_syncs", 0) > 0 and srv.get("commit_ms_mean", 0) > 0, f"{op}: no commits counted: {srv}"
    if workload == "bigdir":
        b = got[0]["bigdir"]
        assert b["entries"] > 0 and b["first_page_ms"] >= 0 and b["total_s"] > 0, f"bigdir stats {b}"
print(f"  ok: {path}: {len(res)} results")
PY
}

run() { # run NAME WORKLOAD OPS -- ARGS...
  local name=$1 workload=$2 ops=$3; shift 4
  echo "smoke: nimbus bench $workload $*"
  if ! "$NIMBUS" bench "$workload" "${targs[@]}" --json "$OUT/$name.json" "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"; then
    echo "  FAILED (exit $?):"; sed 's/^/    /' "$OUT/$name.err" "$OUT/$name.txt"; failed=1; return
  fi
  # shellcheck disable=SC2086
  check "$OUT/$name.json" "$workload" $ops || failed=1
}

run prepare prepare "create-tree" -- --files 2000 --clients 8
run echo echo "echo" -- --clients 1,4 --duration "${SECS}s"
for op in create mkdir read stat ls delete rename chmod; do
  run "micro-$op" micro "echo $op" -- --op "$op" --clients 1,4 --duration "${SECS}s" --files 2000
done
run micro-create-hot micro "echo create" -- --op create --hot-dir --clients 4 --duration "${SECS}s" --files 2000
run bigdir bigdir "ls-bigdir" -- --entries 5000 --clients 8
run subtree subtree "mv" -- --files 2000 --op mv --window 1s

# floor measures no target: it starts its own peer process (no --target)
floor_run() { # floor_run NAME OP ARGS...
  local name=$1 op=$2; shift 2
  echo "smoke: nimbus bench floor $*"
  if "$NIMBUS" bench floor --duration "${SECS}s" --json "$OUT/$name.json" "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"; then
    check "$OUT/$name.json" floor "$op" || failed=1
  else
    echo "  FAILED (exit $?):"; sed 's/^/    /' "$OUT/$name.err" "$OUT/$name.txt"; failed=1
  fi
}
floor_run floor pingpong --clients 1,4
floor_run floor-spin pingpong-spin --clients 1 --spin 50us

echo "smoke: nimbus bench plot"
if "$NIMBUS" bench plot "$OUT"/micro-*.json "$OUT/echo.json" --out "$OUT/png" >"$OUT/plot.txt" 2>&1 \
   && ls "$OUT/png"/throughput-stat.png "$OUT/png"/latency-cdf-stat.png >/dev/null; then
  echo "  ok: $(wc -l <"$OUT/plot.txt") charts"
else
  echo "  FAILED:"; sed 's/^/    /' "$OUT/plot.txt"; failed=1
fi

if [[ $failed != 0 ]]; then
  echo "smoke: FAILED (outputs in $OUT)"; trap - EXIT; exit 1
fi
echo "smoke: all workloads passed"

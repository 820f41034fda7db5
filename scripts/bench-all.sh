#!/usr/bin/env bash
# Reproduces every figure of docs/BENCHMARKS.md's comparison with HDFS: Nimbus over its RPC, Nimbus over WebHDFS
# and HDFS 3.4.1 over WebHDFS driven by `nimbus bench`, plus HDFS's own NNThroughputBenchmark over
# Hadoop RPC against the same NameNode, all on this machine, on loopback.
#
#   scripts/bench-all.sh                       # everything
#   STAGES="compare plot" scripts/bench-all.sh # only some stages (servers are started when needed)
#   OPS="stat read" CLIENTS=1,4 DURATION=2s scripts/bench-all.sh
#
# Stages, in order: build servers prepare echo compare hot issue2 bigdir plot report stop
#   build    go build -o $BIN ./cmd/nimbus
#   servers  nimbus serve on 127.0.0.1:9870 (data in $NIMBUS_DATA) and the HDFS peer (9871 / 8020)
#   prepare  the same tree of $FILES files under /bench on Nimbus (over its RPC) and on HDFS (WebHDFS)
#   echo     the transport ceiling at every client count, on each of the three targets (after $WARMUP of
#            unmeasured stats on each)
#   compare  for each op, $ROUNDS rounds of: for each client count, nimbus://9870, webhdfs://9870 and
#            webhdfs://9871 back to back, then NNThroughputBenchmark for the matching op at that thread
#            count (stat=fileStatus, read=open, create, mkdir=mkdirs, delete, rename; ls and chmod have no
#            NNThroughputBenchmark op: for those bench/hdfs/rpcbench.sh, a closed-loop driver of the
#            NameNode's ClientProtocol like NNThroughputBenchmark, runs instead). The four figures of one ratio are taken within ~30 s of each
#            other, and each system's best round is kept (raw runs in $OUT/raw/): on a shared 2-core VM
#            the noise between runs minutes apart is larger than most differences worth measuring.
#   hot      create with --hot-dir (every client in one directory) on the three targets
#   issue2   the reference points: stat and create at 32 clients over Nimbus's RPC (with a CPU
#            profile of the server over the stat point, issue2-stat-32.cpu.pprof, and its /metrics
#            before and after)
#   bigdir   nimbus bench bigdir --entries $BIGDIR (a million) on Nimbus over its RPC and its WebHDFS
#            gateway, and on HDFS over WebHDFS (its directory filled over Hadoop RPC by RpcBench fill)
#   plot     nimbus bench plot docs/bench/{echo,micro,hot,bigdir}-*.json --out docs/bench/
#   report   the Markdown tables of docs/BENCHMARKS.md from the JSON, into docs/bench/tables.md
#   stop     stop both servers (also done on exit for servers this script started, unless KEEP=1)
#
# NIMBUS_SERVE_FLAGS are added to `nimbus serve` (NIMBUS_SERVE_FLAGS="--cache-bytes 256m": the
# metadata cache on, as the cached-listing comparison asks).
#
# Fresh servers: when this script starts a server itself in a run that has the prepare stage, it
# first deletes that server's data (Nimbus's $NIMBUS_DATA, HDFS's $HDFS_PEER_DIR; the Hadoop jars stay
# in bench/hdfs/lib) and the prepare results, so that every run begins where a newcomer's first run
# does and is aged only by its own stages. KEEP_DATA=1 keeps the data of earlier runs instead (runs
# 7 to 11 of docs/BENCHMARKS.md were measured so, on data directories made for run 7).
#
# Resumable: a result whose JSON file already exists is skipped (FORCE=1 reruns it). The load average
# before and after every run is appended to docs/bench/load.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

STAGES="${STAGES:-build servers prepare echo compare hot issue2 bigdir plot report stop}"
OPS="${OPS:-stat read ls create mkdir delete rename chmod}"
CLIENTS="${CLIENTS:-1,4,16,64,256}"
DURATION="${DURATION:-5s}"
WARMUP="${WARMUP:-10s}"
ROUNDS="${ROUNDS:-2}"
FILES="${FILES:-50000}"
BIGDIR="${BIGDIR:-1000000}"
HDFS_READ_FILES="${HDFS_READ_FILES:-2000}"
OUT="${OUT:-$ROOT/docs/bench}"
BIN="${BIN:-/tmp/nimbus-bench-all/nimbus}"
NIMBUS_DATA="${NIMBUS_DATA:-/tmp/nimbus-bench-all/data}"
export HDFS_PEER_DIR="${HDFS_PEER_DIR:-/tmp/nimbus-bench-all/hdfs}"
# NNThroughputBenchmark: files (dirs for mkdirs) per run, by thread count, so that a run lasts seconds.
NNT_FILES_1="${NNT_FILES_1:-6000}"
NNT_FILES_4="${NNT_FILES_4:-12000}"
NNT_FILES_N="${NNT_FILES_N:-24000}"

NIMBUS_RPC=nimbus://127.0.0.1:9870
NIMBUS_WEB=webhdfs://127.0.0.1:9870
HDFS_WEB=webhdfs://127.0.0.1:9871
TARGETS=("$NIMBUS_RPC" "$NIMBUS_WEB" "$HDFS_WEB")

mkdir -p "$OUT" "$(dirname "$BIN")"
LOAD_LOG="$OUT/load.log"
STARTED_NIMBUS=""
STARTED_HDFS=""

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
has_stage() { [[ " $STAGES " == *" $1 "* ]]; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# name of a target in file names: nimbus-rpc, nimbus-webhdfs, hdfs-webhdfs
tname() {
  case "$1" in
    "$NIMBUS_RPC") echo nimbus-rpc ;; "$NIMBUS_WEB") echo nimbus-webhdfs ;; "$HDFS_WEB") echo hdfs-webhdfs ;;
    *) echo "$1" | tr ':/' '__' ;;
  esac
}
# run NAME CMD...: skip when $OUT/NAME.json exists, log the load before and after
run() {
  local name="$1"; shift
  if [[ -s "$OUT/$name.json" && -z "${FORCE:-}" ]]; then log "skip $name (have $OUT/$name.json)"; return 0; fi
  local before; before="$(load)"
  log "run $name: $*"
  local rc=0
  "$@" || rc=$?
  echo "$(date -u +%FT%TZ) $name load_before=[$before] load_after=[$(load)] rc=$rc" >>"$LOAD_LOG"
  [[ $rc == 0 ]] || log "WARN: $name exited $rc (continuing)"
}

nimbus_up() { curl -fsS -o /dev/null http://127.0.0.1:9870/readyz 2>/dev/null; }
hdfs_up() { bench/hdfs/hdfs-peer.sh status >/dev/null 2>&1; }

# fresh: the servers this script starts begin on empty data (see the header)
fresh() { has_stage prepare && [[ -z "${KEEP_DATA:-}" ]]; }

start_servers() {
  if ! nimbus_up; then
    [[ -x "$BIN" ]] || go build -o "$BIN" ./cmd/nimbus
    if fresh; then
      log "fresh Nimbus: deleting $NIMBUS_DATA (KEEP_DATA=1 keeps it)"
      rm -rf "$NIMBUS_DATA" "$OUT/prepare-nimbus-rpc.json"
    fi
    mkdir -p "$NIMBUS_DATA"
    log "starting nimbus serve --data $NIMBUS_DATA --listen 127.0.0.1:9870"
    # shellcheck disable=SC2086
    "$BIN" serve --data "$NIMBUS_DATA" --listen 127.0.0.1:9870 --debug-addr 127.0.0.1:6060 ${NIMBUS_SERVE_FLAGS:-} >"$(dirname "$NIMBUS_DATA")/serve.log" 2>&1 &
    STARTED_NIMBUS=$!
    echo "$STARTED_NIMBUS" >"$(dirname "$NIMBUS_DATA")/serve.pid"
    for _ in $(seq 1 100); do nimbus_up && break; sleep 0.2; done
    nimbus_up || { log "nimbus serve did not become ready"; tail -20 "$(dirname "$NIMBUS_DATA")/serve.log" >&2; exit 1; }
  fi
  if ! hdfs_up; then
    if fresh; then
      log "fresh HDFS: deleting $HDFS_PEER_DIR (KEEP_DATA=1 keeps it)"
      bench/hdfs/hdfs-peer.sh wipe
      rm -f "$OUT"/prepare-hdfs-webhdfs*.json
    fi
    log "starting the HDFS peer in $HDFS_PEER_DIR"
    bench/hdfs/hdfs-peer.sh install
    bench/hdfs/hdfs-peer.sh start
    STARTED_HDFS=1
  fi
}

stop_servers() {
  local pidf; pidf="$(dirname "$NIMBUS_DATA")/serve.pid"
  if [[ -f "$pidf" ]]; then
    local pid; pid="$(cat "$pidf")"
    if kill -0 "$pid" 2>/dev/null; then
      log "stopping nimbus serve ($pid)"; kill -TERM "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    rm -f "$pidf"
  fi
  if hdfs_up; then log "stopping the HDFS peer"; bench/hdfs/hdfs-peer.sh stop || true; fi
}
on_exit() {
  if [[ -z "${KEEP:-}" && ( -n "$STARTED_NIMBUS" || -n "$STARTED_HDFS" ) ]]; then stop_servers; fi
}
trap on_exit EXIT

nnt_op() {
  case "$1" in
    stat) echo fileStatus ;; read) echo open ;; create) echo create ;; mkdir) echo mkdirs ;;
    delete) echo delete ;; rename) echo rename ;; *) echo "" ;;
  esac
}
nnt_files() { case "$1" in 1) echo "$NNT_FILES_1" ;; 4) echo "$NNT_FILES_4" ;; *) echo "$NNT_FILES_N" ;; esac; }
# peer OP THREADS ROUND: HDFS over Hadoop RPC for OP at THREADS threads, round R: NNThroughputBenchmark
# (nnt_op), or bench/hdfs/rpcbench.sh for $DURATION for ls and chmod, which it lacks. One JSON line is
# appended to $OUT/TOOL-OP.jsonl (skipped when that line exists, unless FORCE).
peer() {
  local op="$1" t="$2" round="$3" tool nop cmd
  nop="$(nnt_op "$op")"
  case "$op" in
    ls|chmod) tool=rpcbench; cmd=(bench/hdfs/rpcbench.sh "$op" "$t" "${DURATION%s}" /bench) ;;
    *) [[ -n "$nop" ]] || return 0
       tool=nnthroughput; cmd=(bench/hdfs/nnthroughput.sh "$nop" "$t" "$(nnt_files "$t")") ;;
  esac
  local out="$OUT/$tool-$op.jsonl"
  if [[ -z "${FORCE:-}" && -s "$out" ]] && grep -q "\"threads\":$t,.*\"round\":$round}" "$out"; then
    log "skip ${cmd[*]} round $round"; return 0
  fi
  local before; before="$(load)"
  log "run ${cmd[*]} (round $round)"
  local line rc=0
  line="$("${cmd[@]}" 2>>"$OUT/$tool.log" | tail -1)" || rc=$?
  echo "$(date -u +%FT%TZ) $tool-$op-$t-r$round load_before=[$before] load_after=[$(load)] rc=$rc" >>"$LOAD_LOG"
  if [[ $rc == 0 && -n "$line" ]]; then
    echo "${line%\}},\"bench_op\":\"$op\",\"loadavg_before\":\"$before\",\"loadavg_after\":\"$(load)\",\"round\":$round}" | tee -a "$out"
  else
    log "WARN: ${cmd[*]} failed (see $OUT/$tool.log)"
  fi
}

# peer_doc: the best round per op and thread count of $OUT/{nnthroughput,rpcbench}-*.jsonl as a results
# document, $OUT/peer-hdfs-rpc.json (system hdfs-rpc; throughput only: those tools report no
# percentiles), which the plot draws and the report reads.
peer_doc() {
  python3 - "$OUT" <<'PY'
import glob, json, sys
out = sys.argv[1]
results = []
for p in sorted(glob.glob(f"{out}/nnthroughput-*.jsonl") + glob.glob(f"{out}/rpcbench-*.jsonl")):
    best = {}
    for line in open(p):
        if line.strip():
            j = json.loads(line)
            if j["threads"] not in best or float(j["ops_per_s"]) > float(best[j["threads"]]["ops_per_s"]):
                best[j["threads"]] = j
    for t, j in sorted(best.items()):
        n = int(j["operations"])
        results.append({"workload": "micro", "op": j["bench_op"], "target": j["target"], "system": "hdfs-rpc",
                        "clients": t, "throughput_ops_s": float(j["ops_per_s"]),
                        "latency_ms": {"p50": 0, "p90": 0, "p99": 0, "p999": 0, "max": 0, "mean": 0},
                        "ops": n, "errors": int(j.get("errors", 0)), "duration_s": int(j["elapsed_ms"]) / 1000,
                        "series": [{"t": 0, "ops": n, "errors": 0}]})
if results:
    doc = {"schema": 1, "tool": "NNThroughputBenchmark and RpcBench via scripts/bench-all.sh", "command": ["peer", "hdfs-rpc"],
           "started": "1970-01-01T00:00:00Z", "host": {}, "results": results}
    json.dump(doc, open(f"{out}/peer-hdfs-rpc.json", "w"), indent=1)
PY
}

# best_of OP: merge $OUT/raw/micro-OP-SYSTEM-cN-rR.json into $OUT/micro-OP-SYSTEM.json, keeping for
# each client count the round with the highest throughput (all rounds listed in "rounds_ops_s").
best_of() {
  python3 - "$OUT" "$1" <<'PY'
import glob, json, os, re, sys
out, op = sys.argv[1], sys.argv[2]
for system in ("nimbus-rpc", "nimbus-webhdfs", "hdfs-webhdfs"):
    best, rounds, doc = {}, {}, None
    for f in sorted(glob.glob(f"{out}/raw/micro-{op}-{system}-c*-r*.json")):
        d = json.load(open(f))
        doc = doc or d
        for r in d["results"]:
            c = r["clients"]
            rounds.setdefault(c, []).append(round(r["throughput_ops_s"], 1))
            if c not in best or r["throughput_ops_s"] > best[c]["throughput_ops_s"]:
                best[c] = r
    if doc is None:
        continue
    for c, r in best.items():
        r["rounds_ops_s"] = rounds[c]
    doc["results"] = [best[c] for c in sorted(best)]
    doc["best_of_rounds"] = max(len(v) for v in rounds.values())
    json.dump(doc, open(f"{out}/micro-{op}-{system}.json", "w"), indent=1)
PY
}

need_servers() { nimbus_up && hdfs_up || start_servers; }

for stage in build servers prepare echo compare hot issue2 bigdir plot report stop; do
  has_stage "$stage" || continue
  log "=== stage $stage (load $(load))"
  echo "$(date -u +%FT%TZ) stage $stage start load=[$(load)]" >>"$LOAD_LOG"
  case "$stage" in
    build)
      go build -o "$BIN" ./cmd/nimbus ;;
    servers)
      start_servers ;;
    prepare)
      need_servers
      run prepare-nimbus-rpc "$BIN" bench prepare --target "$NIMBUS_RPC" --files "$FILES" --json "$OUT/prepare-nimbus-rpc.json"
      # HDFS closes a file that has a block only after the DataNode reported it (the WebHDFS writer's
      # complete() retries after 400 ms), so a 16-byte file costs ~0.4 s there: 50,000 of them would take
      # most of an hour, and so would putting deleted files back after each delete run. The HDFS tree
      # is therefore the same tree with empty files (no block); `read` on HDFS uses a second tree of
      # $HDFS_READ_FILES 16-byte files under /bench16, made with many parallel writers.
      run prepare-hdfs-webhdfs "$BIN" bench prepare --target "$HDFS_WEB" --files "$FILES" --file-size 0 --clients 64 --json "$OUT/prepare-hdfs-webhdfs.json"
      run prepare-hdfs-webhdfs-bench16 "$BIN" bench prepare --target "$HDFS_WEB" --root /bench16 --files "$HDFS_READ_FILES" --clients 256 --json "$OUT/prepare-hdfs-webhdfs-bench16.json" ;;
    echo)
      need_servers
      # A server started a minute ago (HDFS's JIT, Nimbus's caches) is not the server the later stages
      # measure: warm each target up with ${WARMUP} of stats first, unmeasured (from the fourth run on).
      for t in "${TARGETS[@]}"; do
        [[ -s "$OUT/echo-$(tname "$t").json" && -z "${FORCE:-}" ]] && continue
        log "warm-up $t: stat, 16 clients, $WARMUP"
        "$BIN" bench micro --target "$t" --root /bench --op stat --clients 16 --duration "$WARMUP" --no-echo >/dev/null 2>&1 || true
      done
      for t in "${TARGETS[@]}"; do
        run "echo-$(tname "$t")" "$BIN" bench echo --target "$t" --clients "$CLIENTS" --duration "$DURATION" --json "$OUT/echo-$(tname "$t").json"
      done
      # the floor under the echoes: a bare TCP round trip between two processes, no RPC stack
      [[ -s "$OUT/echo-floor.json" && -z "${FORCE:-}" ]] || \
        run echo-floor "$BIN" bench floor --clients "$CLIENTS" --duration "$DURATION" --json "$OUT/echo-floor.json" ;;
    compare)
      need_servers
      mkdir -p "$OUT/raw"
      for op in $OPS; do
        # a forced rerun replaces the peer's rounds too (the report keeps the best of what is there)
        [[ -n "${FORCE:-}" ]] && rm -f "$OUT/nnthroughput-$op.jsonl" "$OUT/rpcbench-$op.jsonl"
        for round in $(seq 1 "$ROUNDS"); do
          for c in ${CLIENTS//,/ }; do
            for t in "${TARGETS[@]}"; do
              # --no-echo: the ceiling is the echo stage's sweep of the same batch (it would double the time)
              root=/bench; [[ "$t" == "$HDFS_WEB" && "$op" == read ]] && root=/bench16
              name="raw/micro-$op-$(tname "$t")-c$c-r$round"
              run "$name" "$BIN" bench micro --target "$t" --root "$root" --op "$op" --clients "$c" \
                --duration "$DURATION" --no-echo --json "$OUT/$name.json"
            done
            peer "$op" "$c" "$round"
          done
        done
        best_of "$op"
      done ;;
    hot)
      need_servers
      for t in "${TARGETS[@]}"; do
        run "hot-create-$(tname "$t")" "$BIN" bench micro --target "$t" --op create --hot-dir --clients "$CLIENTS" \
          --duration "$DURATION" --no-echo --json "$OUT/hot-create-$(tname "$t").json"
      done ;;
    issue2)
      need_servers
      # A CPU profile of the server over this point (its echo, then its stats) and the server's
      # /metrics around it: it runs at the end of a long run, where a server's cost per operation
      # was seen to grow (docs/BENCHMARKS.md, "Where Nimbus is behind").
      prof=""
      if [[ ! -s "$OUT/issue2-stat-32.json" || -n "${FORCE:-}" ]]; then
        curl -fsS -o "$OUT/issue2-stat-32.metrics-before.txt" http://127.0.0.1:9870/metrics || true
        curl -fsS -o "$OUT/issue2-stat-32.cpu.pprof" "http://127.0.0.1:6060/debug/pprof/profile?seconds=12" &
        prof=$!
      fi
      # with its own echo at 32 clients (echo_fraction in the JSON)
      run issue2-stat-32 "$BIN" bench micro --target "$NIMBUS_RPC" --op stat --clients 32 --duration "$DURATION" --json "$OUT/issue2-stat-32.json"
      if [[ -n "$prof" ]]; then
        wait "$prof" || log "WARN: no CPU profile of the issue2 stat point"
        curl -fsS -o "$OUT/issue2-stat-32.metrics-after.txt" http://127.0.0.1:9870/metrics || true
      fi
      run issue2-create-32 "$BIN" bench micro --target "$NIMBUS_RPC" --op create --clients 32 --duration "$DURATION" --json "$OUT/issue2-create-32.json" ;;
    bigdir)
      need_servers
      # Nimbus fills its directory over the RPC (64 writers) and the WebHDFS run lists the same one. HDFS's
      # is filled over Hadoop RPC by RpcBench (create and complete, no block), since a create over
      # WebHDFS is a redirect to the DataNode (~1,000/s here); then the same tool lists it over WebHDFS.
      # The directory lives under /bigdir, not /bench, where RpcBench's walk would find its files.
      run bigdir-nimbus-rpc "$BIN" bench bigdir --target "$NIMBUS_RPC" --root /bigdir --entries "$BIGDIR" --clients 64 --json "$OUT/bigdir-nimbus-rpc.json"
      run bigdir-nimbus-webhdfs "$BIN" bench bigdir --target "$NIMBUS_WEB" --root /bigdir --entries "$BIGDIR" --json "$OUT/bigdir-nimbus-webhdfs.json"
      if [[ ! -s "$OUT/bigdir-hdfs-webhdfs.json" || -n "${FORCE:-}" ]]; then
        log "run bench/hdfs/rpcbench.sh fill 64 $BIGDIR /bigdir/.bigdir-$BIGDIR"
        bench/hdfs/rpcbench.sh fill 64 "$BIGDIR" "/bigdir/.bigdir-$BIGDIR" 2>>"$OUT/rpcbench.log" | tail -1 >"$OUT/bigdir-fill-hdfs-rpc.jsonl" \
          || log "WARN: the HDFS bigdir fill failed (see $OUT/rpcbench.log)"
      fi
      run bigdir-hdfs-webhdfs "$BIN" bench bigdir --target "$HDFS_WEB" --root /bigdir --entries "$BIGDIR" --json "$OUT/bigdir-hdfs-webhdfs.json" ;;
    plot)
      peer_doc # HDFS over Hadoop RPC as a fourth line
      # the sweeps only: the reference points and the prepare runs would add stray points
      peer=(); [[ -s "$OUT/peer-hdfs-rpc.json" ]] && peer=("$OUT/peer-hdfs-rpc.json")
      "$BIN" bench plot "$OUT"/echo-*.json "$OUT"/micro-*.json "$OUT"/hot-*.json "$OUT"/bigdir-*.json "${peer[@]}" --out "$OUT/" ;;
    report)
      peer_doc
      python3 - "$OUT" >"$OUT/tables.md" <<'PY'
#!/usr/bin/env python3
# Markdown tables of docs/BENCHMARKS.md from the JSON of scripts/bench-all.sh.
import json, glob, os, sys
D = sys.argv[1] if len(sys.argv) > 1 else "docs/bench"
SYS = ["nimbus-rpc", "nimbus-webhdfs", "hdfs-webhdfs"]
OPS = ["stat", "read", "ls", "create", "mkdir", "delete", "rename", "chmod"]
NNT = {"stat": "fileStatus", "read": "open", "create": "create", "mkdir": "mkdirs", "delete": "delete", "rename": "rename"}
RPCBENCH = {"ls": "getListing", "chmod": "setPermission"}
TARGET_RPC = {"stat": 3, "read": 3, "ls": 3, "create": 2, "mkdir": 2, "delete": 2, "rename": 2}

def load(path):
    try:
        return json.load(open(path))["results"]
    except FileNotFoundError:
        return []

def by_clients(results, op=None):
    return {r["clients"]: r for r in results if op is None or r["op"] == op}

echo = {s: by_clients(load(f"{D}/echo-{s}.json"), "echo") for s in SYS}
echo_http = by_clients(load(f"{D}/echo-nimbus-rpc.json"), "echo-http")
floor = by_clients(load(f"{D}/echo-floor.json"), "pingpong")

def nnt(op):
    # HDFS over Hadoop RPC: the best round per thread count (peer_doc), as for the other systems
    return {r["clients"]: {"ops_per_s": r["throughput_ops_s"]} for r in load(f"{D}/peer-hdfs-rpc.json") if r["op"] == op}

def f0(x): return "–" if x is None else f"{x:,.0f}"
def f2(x): return "–" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.1f}")
def fr(x): return "–" if x is None else f"{x:.2f}×"

print("## Echo (transport ceiling), ops/s\n")
print("| clients | bare TCP round trip, two processes (`nimbus bench floor`) | Nimbus RPC echo (TCP no-op) | Nimbus HTTP echo (no-op) | Nimbus WebHDFS GETFILESTATUS / | HDFS WebHDFS GETFILESTATUS / |")
print("|---:|---:|---:|---:|---:|---:|")
for c in sorted(echo["nimbus-rpc"]):
    g = lambda m: m.get(c, {}).get("throughput_ops_s")
    print(f"| {c} | {f0(g(floor))} | {f0(g(echo['nimbus-rpc']))} | {f0(g(echo_http))} | {f0(g(echo['nimbus-webhdfs']))} | {f0(g(echo['hdfs-webhdfs']))} |")
print()

summary = []
for op in OPS:
    res = {s: by_clients(load(f"{D}/micro-{op}-{s}.json")) for s in SYS}
    nn = nnt(op)
    clients = sorted(set().union(*[set(v) for v in res.values()], set(nn)))
    if not clients:
        continue
    print(f"### {op}\n")
    print("Throughput, ops/s (errors in brackets when not 0); ratios at the same client count:\n")
    peer = f"NNThroughput `{NNT[op]}`" if op in NNT else (f"RpcBench `{RPCBENCH[op]}`" if op in RPCBENCH else "not measured")
    print(f"| clients | Nimbus RPC | Nimbus WebHDFS | HDFS WebHDFS | HDFS RPC ({peer}) | Nimbus RPC / HDFS RPC | Nimbus WebHDFS / HDFS WebHDFS |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    rr, rw = [], []
    for c in clients:
        t = {}
        cells = []
        for s in SYS:
            r = res[s].get(c)
            t[s] = r["throughput_ops_s"] if r else None
            cell = f0(t[s])
            if r and r.get("errors"):
                cell += f" ({r['errors']} err)"
            cells.append(cell)
        n = nn.get(c, {}).get("ops_per_s")
        n = float(n) if n is not None else None
        a = t["nimbus-rpc"] / n if t["nimbus-rpc"] and n else None
        b = t["nimbus-webhdfs"] / t["hdfs-webhdfs"] if t["nimbus-webhdfs"] and t["hdfs-webhdfs"] else None
        if a: rr.append((c, a))
        if b: rw.append((c, b))
        print(f"| {c} | {' | '.join(cells)} | {f0(n)} | {fr(a)} | {fr(b)} |")
    print()
    print("Latency p50 / p99, ms, and throughput as a fraction of the same target's echo at the same client count:\n")
    print("| clients | Nimbus RPC p50 / p99 | Nimbus WebHDFS p50 / p99 | HDFS WebHDFS p50 / p99 | Nimbus RPC / echo | Nimbus WebHDFS / its echo | HDFS WebHDFS / its echo |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for c in clients:
        lat, frac = [], []
        for s in SYS:
            r = res[s].get(c)
            if r:
                l = r["latency_ms"]
                lat.append(f"{f2(l['p50'])} / {f2(l['p99'])}")
                e = echo[s].get(c, {}).get("throughput_ops_s")
                frac.append(f"{r['throughput_ops_s']/e:.2f}" if e else "–")
            else:
                lat.append("–"); frac.append("–")
        print(f"| {c} | {' | '.join(lat)} | {' | '.join(frac)} |")
    print()
    if any(r.get("server") for v in res.values() for r in v.values()):
        print("CPU per operation, µs, from each server's own counters over the same runs (HDFS: the NameNode's"
              + (", without the DataNode that serves the bytes" if op == "read" else "")
              + "), and the driver's; Nimbus's durable commits per WAL fsync:\n")
        print("| clients | Nimbus RPC server | Nimbus WebHDFS server | HDFS WebHDFS NameNode | driver (Nimbus RPC / WebHDFS / HDFS) | commits per fsync (RPC / WebHDFS) |")
        print("|---:|---:|---:|---:|---:|---:|")
        for c in clients:
            srv, drv, cps = [], [], []
            for s in SYS:
                r = res[s].get(c) or {}
                v = r.get("server") or {}
                srv.append(f2(v.get("cpu_us_per_op")) if v.get("cpu_us_per_op") else "–")
                drv.append(f2(r.get("driver_cpu_us_per_op")) if r.get("driver_cpu_us_per_op") else "–")
                if s != "hdfs-webhdfs":
                    cps.append(f"{v['commits']/v['log_syncs']:.1f}" if v.get("log_syncs") else "–")
            print(f"| {c} | {' | '.join(srv)} | {' / '.join(drv)} | {' / '.join(cps)} |")
        print()
    summary.append((op, rr, rw, res, nn))

print("## Targets against HDFS\n")
print("| op | Nimbus RPC / HDFS RPC, per client count | target | met? | Nimbus WebHDFS / HDFS WebHDFS, per client count | target | met? |")
print("|---|---|---:|---|---|---:|---|")
for op, rr, rw, res, nn in summary:
    tr = TARGET_RPC.get(op)
    srr = ", ".join(f"{c}: {a:.2f}" for c, a in rr) or "not measured"
    srw = ", ".join(f"{c}: {a:.2f}" for c, a in rw) or "–"
    def met(lst, tgt):
        if tgt is None or not lst: return "–"
        ok = [c for c, a in lst if a >= tgt]
        if len(ok) == len(lst): return "**met** at every count"
        if not ok: return "**not met** at any count"
        return f"**partly**: met at {', '.join(map(str, ok))}; not at {', '.join(str(c) for c, a in lst if a < tgt)}"
    print(f"| {op} | {srr} | {'≥ %d×' % tr if tr else '–'} | {met(rr, tr) if tr and rr else ('–' if not tr else 'not measured')} | {srw} | ≥ 1.5× | {met(rw, 1.5)} |")
print()
print("## One-client write ceilings: 1 / (echo round trip + mean durable commit), same run\n")
print("| op | HDFS RPC, 1 client | 2× that | Nimbus RPC echo round trip | Nimbus mean durable commit | ceiling | Nimbus RPC measured |")
print("|---|---:|---:|---:|---:|---:|---:|")
e1 = echo["nimbus-rpc"].get(1, {}).get("throughput_ops_s")
for op in ["create", "mkdir", "delete", "rename", "chmod"]:
    r = by_clients(load(f"{D}/micro-{op}-nimbus-rpc.json")).get(1)
    if not (e1 and r and (r.get("server") or {}).get("commit_ms_mean")):
        continue
    rtt, cm = 1e6 / e1, r["server"]["commit_ms_mean"] * 1000
    h = nnt(op).get(1, {}).get("ops_per_s")
    print(f"| {op} | {f0(h)} | {f0(2*h) if h else '–'} | {rtt:.0f} µs | {cm:.0f} µs | {f0(1e6/(rtt+cm))} | {f0(r['throughput_ops_s'])} |")
print()
print("## Hot directory: create, every client in one directory (ops/s, p50 / p99 ms)\n")
hot = {s: by_clients(load(f"{D}/hot-create-{s}.json")) for s in SYS}
cre = {s: by_clients(load(f"{D}/micro-create-{s}.json")) for s in SYS}
print("| clients | Nimbus RPC hot | (own dirs) | Nimbus WebHDFS hot | (own dirs) | HDFS WebHDFS hot | (own dirs) | Nimbus WebHDFS / HDFS WebHDFS, hot |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for c in sorted(set().union(*[set(v) for v in hot.values()])):
    cells = []
    for s in SYS:
        r = hot[s].get(c); o = cre[s].get(c)
        cells.append(f"{f0(r['throughput_ops_s'])} ({f2(r['latency_ms']['p50'])} / {f2(r['latency_ms']['p99'])})" + (f" [{r['errors']} err]" if r.get('errors') else "") if r else "–")
        cells.append(f0(o["throughput_ops_s"]) if o else "–")
    a = hot["nimbus-webhdfs"].get(c); b = hot["hdfs-webhdfs"].get(c)
    print(f"| {c} | {' | '.join(cells)} | {fr(a['throughput_ops_s']/b['throughput_ops_s']) if a and b else '–'} |")
print()
print("## Reference points (Nimbus over its RPC, 32 clients)\n")
print("| op | ops/s | p50 ms | p99 ms | echo at 32 (same command) | fraction of echo | errors | target |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for op, tgt in (("stat", 40000), ("create", 8000)):
    for r in load(f"{D}/issue2-{op}-32.json"):
        if r["op"] != op: continue
        ok = "met" if r["throughput_ops_s"] >= tgt else "**not met**"
        print(f"| {op} | {f0(r['throughput_ops_s'])} | {f2(r['latency_ms']['p50'])} | {f2(r['latency_ms']['p99'])} | {f0(r.get('echo_ops_s'))} | {r.get('echo_fraction', 0):.2f} | {r['errors']} | ≥ {tgt:,}: {ok} |")
print()
print("## bigdir\n")
print("| target | entries | fill s | first page ms | total s | entries/s | pages | p50 / p99 ms per page | server memory before → max (MB) | source |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for s in ("nimbus-rpc", "nimbus-webhdfs", "hdfs-webhdfs"):
    for r in load(f"{D}/bigdir-{s}.json"):
        b = r.get("bigdir")
        if not b: continue
        mb = lambda x: f"{x/1e6:.0f}" if x else "–"
        print(f"| {r['system']} | {b['entries']:,} | {b.get('fill_s',0):.1f} | {b['first_page_ms']:.1f} | {b['total_s']:.2f} | {f0(b['entries_per_s'])} | {b['pages']} | {f2(r['latency_ms']['p50'])} / {f2(r['latency_ms']['p99'])} | {mb(b.get('mem_bytes_before'))} → {mb(b.get('mem_bytes_max'))} | {b.get('mem_source','')} {b.get('mem_error','')} |")
print()
for line in open(f"{D}/bigdir-fill-hdfs-rpc.jsonl") if os.path.exists(f"{D}/bigdir-fill-hdfs-rpc.jsonl") else []:
    if line.strip():
        j = json.loads(line)
        print(f"HDFS's directory was filled over Hadoop RPC by `bench/hdfs/rpcbench.sh fill {j['threads']} ...`: "
              f"{j['operations']:,} creates in {j['elapsed_ms']/1000:.1f} s ({f0(j['ops_per_s'])}/s, {j['existed']:,} existed already, {j['errors']} errors).")
print()
PY
      log "tables in $OUT/tables.md" ;;
    stop)
      stop_servers ;;
  esac
  echo "$(date -u +%FT%TZ) stage $stage end load=[$(load)]" >>"$LOAD_LOG"
done
log "done; results in $OUT"

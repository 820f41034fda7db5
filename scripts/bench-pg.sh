#!/usr/bin/env bash
# The figures of docs/STORE.md's "Speed" (PostgreSQL), in one run on one private cluster
# (scripts/pg.sh):
#   1. `nimbus bench micro` of $OPS at each of $CLIENTS against `nimbus serve` on Pebble, then against
#      `nimbus serve --store postgres://.../nimbus_bench` (a fresh database), each on a fresh tree of
#      $FILES files; for PostgreSQL the server's nimbus_pgstore_round_trips_total is read before and
#      after every point (round trips per operation = its growth / the point's operations).
#   2. A short statement log of the PostgreSQL-backed server (log_statement=all, switched on with
#      ALTER SYSTEM only after the timed points): a stat and a create run through it, and the
#      statements sent for each operation are checked against the `-- nimbus:` header of
#      store/pgstore/testdata/pgbench/{stat,create}.sql (the script fails if they differ). The key
#      arrays the stats sent (paths of the prepared tree) become the table nimbus_pgbench_paths that
#      those scripts draw their random keys from.
#   3. pgbench on the same cluster at each of $CLIENTS: `-S -M prepared` and the default TPC-B-like
#      script on pgbench's own tables (scale $PGBENCH_SCALE), and stat.sql / create.sql on the
#      nimbus_bench database.
# Writes $OUT/pg-bench.json (the repo's bench JSON: pgbench points are results of workload
# "pgbench"; PostgreSQL points carry pg_round_trips_per_op), $OUT/pg-bench.md (the tables and the
# ratios Nimbus-over-PostgreSQL / pgbench-of-the-same-statements) and $OUT/pg-bench-cpu.txt
# (`top` samples: how the cores were split during the 16- and 64-client stat and create points).
#
#   scripts/bench-pg.sh
#   OPS="stat create" CLIENTS="16 64" DURATION=3s scripts/bench-pg.sh
#
# About ten minutes on 2 cores. Run it alone: everything shares the machine's cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OPS="${OPS:-stat ls create mkdir rename delete}"
CLIENTS="${CLIENTS:-1 16 64}"
DURATION="${DURATION:-5s}"
FILES="${FILES:-20000}"
PGBENCH_SCALE="${PGBENCH_SCALE:-10}"
OUT="${OUT:-$ROOT/docs/bench/pg}"
WORK="${WORK:-/tmp/nimbus-bench-pg}"
BIN="${BIN:-$WORK/nimbus}"
ADDR="${ADDR:-127.0.0.1:9881}"
export NIMBUS_PG_DIR="${NIMBUS_PG_DIR:-$WORK/pg}"
export NIMBUS_PG_PORT="${NIMBUS_PG_PORT:-56500}"
TESTDATA="$ROOT/store/pgstore/testdata/pgbench"

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
die() { echo "bench-pg.sh: $*" >&2; exit 1; }

mkdir -p "$OUT" "$WORK"
rm -f "$OUT"/raw-*.json "$OUT"/rt-*.txt
chmod 755 "$WORK"

log "build"
GOFLAGS=-buildvcs=false go build -o "$BIN" ./cmd/nimbus

log "PostgreSQL"
URL="$(scripts/pg.sh start)"
SERVER=""
cleanup() {
  [[ -n "$SERVER" ]] && { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true; }
  scripts/pg.sh stop || true
}
trap cleanup EXIT
BASE="${URL%%/postgres\?*}"            # postgres://postgres@127.0.0.1:PORT
DB_URL="$BASE/nimbus_bench?sslmode=disable"
PGLOG="$NIMBUS_PG_DIR/log"
psql -q "$URL" -c 'DROP DATABASE IF EXISTS nimbus_bench' -c 'CREATE DATABASE nimbus_bench'

# start_server ARGS...: a fresh `nimbus serve` on $ADDR (pid in SERVER).
start_server() {
  rm -rf "$WORK/data"
  "$BIN" serve --data "$WORK/data" --listen "$ADDR" --log-level warn "$@" >"$WORK/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 100); do curl -sf "http://$ADDR/readyz" >/dev/null && return; sleep 0.1; done
  die "server did not start: $(tail -3 "$WORK/serve.log")"
}
stop_server() {
  kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true
  SERVER=""
}
round_trips() {
  curl -sf "http://$ADDR/metrics" | awk '$1 == "nimbus_pgstore_round_trips_total" { print $2 }'
}
# cpu_sample NAME: in the background, the CPU each process used over 3 s of the point (from 1 s
# after its start), from /proc, grouped: the server, the bench driver, PostgreSQL's backends,
# pgbench, the rest of the machine (other users of the shared cores).
SAMPLER=""
cpu_sample() {
  python3 - "$1" "$ADDR" >>"$OUT/pg-bench-cpu.txt" 2>&1 <<'PY' &
import os, sys, time
name, addr = sys.argv[1], sys.argv[2]
hz = os.sysconf("SC_CLK_TCK")
def snap():
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            st = open(f"/proc/{pid}/stat").read()
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        f = st[st.rindex(")") + 2:].split()
        out[pid] = (int(f[11]) + int(f[12]), cmd)
    return out
def group(cmd):
    if " serve " in cmd and addr in cmd:
        return "nimbus server"
    if " bench micro " in cmd:
        return "bench driver"
    prog = os.path.basename(cmd.split(" ")[0])  # Debian's pgbench is a wrapper that execs /usr/lib/postgresql/N/bin/pgbench
    if prog == "postgres" or cmd.startswith("postgres:"):
        return "postgres"
    if prog == "pgbench":
        return "pgbench"
    return "other processes"
time.sleep(1)
a, t0 = snap(), time.time()
time.sleep(3)
b, t1 = snap(), time.time()
cpu = {}
for pid, (ticks, cmd) in b.items():
    used = ticks - a.get(pid, (0, ""))[0] if pid in a else ticks
    if pid not in a:
        continue  # started during the window: its whole life is not in it; ignore
    cpu[group(cmd)] = cpu.get(group(cmd), 0) + used / hz / (t1 - t0) * 100
print(name + "\t" + "\t".join(f"{k}={v:.0f}" for k, v in sorted(cpu.items())))
PY
  SAMPLER=$!
}
# sampled: waits for the `top` sample of the point, if one was taken.
sampled() {
  [[ -n "$SAMPLER" ]] && wait "$SAMPLER" || true
  SAMPLER=""
}
: >"$OUT/pg-bench-cpu.txt"

# measure SYSTEM: every op at every client count against the running server.
measure() {
  local sys=$1 op c before after
  "$BIN" bench prepare --target "nimbus://$ADDR" --files "$FILES" >"$WORK/prepare-$sys.log" 2>&1 ||
    die "prepare on $sys failed: $(tail -3 "$WORK/prepare-$sys.log")"
  for op in $OPS; do
    for c in $CLIENTS; do
      before=$(round_trips || true)
      [[ $c -ge 16 && ( $op == stat || $op == create ) ]] && cpu_sample "$sys $op $c clients"
      "$BIN" bench micro --target "nimbus://$ADDR" --op "$op" --clients "$c" --duration "$DURATION" \
        --files "$FILES" --no-echo --warmup 1s --label "$sys" --json "$OUT/raw-$sys-$op-$c.json" >/dev/null 2>"$WORK/micro.log" ||
        die "$sys $op $c: $(tail -3 "$WORK/micro.log")"
      sampled
      after=$(round_trips || true)
      [[ -n "$before" ]] && echo "$before $after" >"$OUT/rt-$sys-$op-$c.txt"
      log "$sys $op $c: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print(round(r["throughput_ops_s"]), "ops/s, errors", r["errors"])' "$OUT/raw-$sys-$op-$c.json")"
    done
  done
}

log "Nimbus on Pebble ($FILES files)"
start_server
measure pebble
stop_server

log "Nimbus on PostgreSQL ($FILES files)"
start_server --store "$DB_URL"
measure postgres

# The statement log: one stat run and one create run with log_statement=all.
log "statement log of a stat and a create"
psql -q "$URL" -c "ALTER SYSTEM SET log_statement = 'all'" -c 'SELECT pg_reload_conf()' >/dev/null
sleep 0.5
from=$(wc -l <"$PGLOG")
"$BIN" bench micro --target "nimbus://$ADDR" --op stat --clients 1 --ops-per-client 2000 --files "$FILES" --no-echo --warmup 0 >/dev/null 2>&1
mid=$(wc -l <"$PGLOG")
"$BIN" bench micro --target "nimbus://$ADDR" --op create --clients 1 --ops-per-client 200 --files "$FILES" --no-echo --warmup 0 >/dev/null 2>&1
to=$(wc -l <"$PGLOG")
psql -q "$URL" -c 'ALTER SYSTEM RESET log_statement' -c 'SELECT pg_reload_conf()' >/dev/null
sed -n "$((from + 1)),${mid}p" "$PGLOG" >"$WORK/stat.log"
sed -n "$((mid + 1)),${to}p" "$PGLOG" >"$WORK/create.log"
stop_server

# check_statements OPS LOG SCRIPT: the statements sent at least 0.9 × OPS times in LOG (once per
# operation) must be the `-- nimbus:` lines of SCRIPT, in the same order of first appearance.
check_statements() {
  python3 - "$@" <<'PY'
import re, sys
ops, logf, script = int(sys.argv[1]), sys.argv[2], sys.argv[3]
stmt = re.compile(r"LOG:  (?:execute [^:]+|statement): (.*)$")
counts, order = {}, []
for line in open(logf, errors="replace"):
    m = stmt.search(line)
    if m:
        s = m.group(1).strip()
        if s not in counts:
            order.append(s)
        counts[s] = counts.get(s, 0) + 1
sent = [s for s in order if counts[s] >= 0.9 * ops]
want = [l[len("-- nimbus: "):].strip() for l in open(script) if l.startswith("-- nimbus: ")]
if sorted(sent) != sorted(want):
    print(f"bench-pg.sh: {script}: its '-- nimbus:' statements differ from what Nimbus sent per operation:", file=sys.stderr)
    for s in sent:
        print(f"  sent {counts[s]:5d}x: {s}", file=sys.stderr)
    for s in want:
        print(f"  script:      {s}", file=sys.stderr)
    sys.exit(1)
print(f"{script}: matches the statement log ({', '.join(str(counts[s]) for s in sent)} for {ops} operations)")
PY
}
check_statements 2000 "$WORK/stat.log" "$TESTDATA/stat.sql" | tee "$OUT/pg-bench-statements.txt"
check_statements 200 "$WORK/create.log" "$TESTDATA/create.sql" | tee -a "$OUT/pg-bench-statements.txt"

# The stats' key arrays (root, /bench, ..., the file: paths of the prepared tree) into
# nimbus_pgbench_paths, with what create.sql needs: the directory's ancestors, its row and the
# prefix of its children's keys ('i' and its id), and a file's row as the new file's value.
python3 - "$WORK/stat.log" >"$WORK/paths.tsv" <<'PY'
import re, sys
seen = set()
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"DETAIL:  parameters: \$1 = '(\{.*\})'$", line)
    if m and m.group(1) not in seen and m.group(1).count(",") >= 2:
        seen.add(m.group(1))
        print(m.group(1).replace("\\", "\\\\"))  # COPY's text format unescapes backslashes
PY
npaths=$(wc -l <"$WORK/paths.tsv")
[[ $npaths -ge 100 ]] || die "only $npaths paths in the statement log of the stats"
psql -q "$DB_URL" -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE TEMP TABLE logged (i serial, keys bytea[]);
\copy logged (keys) FROM '$WORK/paths.tsv'
CREATE TABLE nimbus_pgbench_paths (n int PRIMARY KEY, keys bytea[] NOT NULL, anc bytea[] NOT NULL,
  dkey bytea NOT NULL, dval bytea NOT NULL, prefix bytea NOT NULL, fval bytea NOT NULL);
INSERT INTO nimbus_pgbench_paths
SELECT row_number() OVER (ORDER BY i), keys, anc, dkey, d.value, prefix, f.value
FROM (SELECT i, keys, keys[1:cardinality(keys) - 2] AS anc, keys[cardinality(keys) - 1] AS dkey,
        substring(keys[cardinality(keys)] FROM 1 FOR 9) AS prefix, keys[cardinality(keys)] AS fkey FROM logged) l
JOIN nimbus_kv d ON d.key = l.dkey JOIN nimbus_kv f ON f.key = l.fkey;
VACUUM ANALYZE;
SQL
npaths=$(psql -tA "$DB_URL" -c 'SELECT count(*) FROM nimbus_pgbench_paths')
[[ $npaths -ge 100 ]] || die "only $npaths paths of the prepared tree have their rows"
log "$npaths paths of the prepared tree for pgbench"

log "pgbench -i -s $PGBENCH_SCALE"
psql -q "$URL" -c 'DROP DATABASE IF EXISTS pgbench' -c 'CREATE DATABASE pgbench'
pgbench -i -q -s "$PGBENCH_SCALE" "$BASE/pgbench?sslmode=disable" >"$WORK/pgbench-init.log" 2>&1
secs=${DURATION%s}
# pgb NAME CLIENTS ARGS...: one pgbench point; its result as raw-pgbench-NAME-CLIENTS.json.
pgb() {
  local name=$1 c=$2; shift 2
  local j=$((c < 2 ? 1 : 2))
  [[ $c -ge 16 && ( $name == nimbus-stat || $name == nimbus-create ) ]] && cpu_sample "pgbench $name $c clients"
  pgbench -n -c "$c" -j "$j" -T "$secs" -M prepared "$@" >"$WORK/pgbench.out" 2>&1 ||
    die "pgbench $name $c: $(tail -5 "$WORK/pgbench.out")"
  sampled
  python3 - "$name" "$c" "$WORK/pgbench.out" "$OUT/raw-pgbench-$name-$c.json" "$*" <<'PY'
import json, re, sys
name, c, out, dst, args = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read(), sys.argv[4], sys.argv[5]
tx = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
failed = re.search(r"number of failed transactions: (\d+)", out)
lat = float(re.search(r"latency average = ([\d.]+) ms", out).group(1))
tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
dur = tx / tps if tps else 0
json.dump({"workload": "pgbench", "op": name, "target": "pgbench " + args, "system": "pgbench",
           "clients": c, "throughput_ops_s": tps, "ops": tx, "errors": int(failed.group(1)) if failed else 0,
           "duration_s": dur, "latency_ms": {"p50": lat, "p90": lat, "p99": lat, "p999": lat, "max": lat, "mean": lat},
           "series": [{"t": max(1, round(dur)), "ops": tx, "errors": 0}]}, open(dst, "w"))
print(f"{tps:.0f} tps")
PY
}
# The scripts of Nimbus's statements run with the session settings pgstore gives its own
# connections (store/pgstore/store.go), so that PostgreSQL plans them alike.
NIMBUS_PGOPTIONS="-c plan_cache_mode=force_generic_plan -c enable_seqscan=off"
for c in $CLIENTS; do
  r=$(pgb select-only "$c" -S "$BASE/pgbench?sslmode=disable"); log "pgbench -S $c: $r"
  r=$(pgb tpcb "$c" "$BASE/pgbench?sslmode=disable"); log "pgbench tpcb $c: $r"
  r=$(PGOPTIONS="$NIMBUS_PGOPTIONS" pgb nimbus-stat "$c" -D paths="$npaths" -f "$TESTDATA/stat.sql" "$DB_URL"); log "pgbench stat.sql $c: $r"
  r=$(PGOPTIONS="$NIMBUS_PGOPTIONS" pgb nimbus-create "$c" -D paths="$npaths" -f "$TESTDATA/create.sql" "$DB_URL"); log "pgbench create.sql $c: $r"
done

log "report"
python3 - "$OUT" "$FILES" "$DURATION" "$CLIENTS" "$OPS" "$(nproc)" <<'PY'
import glob, json, os, platform, sys, datetime
out, files, duration, clients, ops, cpus = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split(), int(sys.argv[6])
res, started = {}, None
for f in sorted(glob.glob(os.path.join(out, "raw-*.json"))):
    d = json.load(open(f))
    for r in d.get("results", [d]):
        if r.get("workload") == "echo":
            continue
        rt = f.replace("raw-", "rt-").replace(".json", ".txt")
        if os.path.exists(rt) and r["ops"] > 0:
            b, a = map(float, open(rt).read().split())
            r["pg_round_trips_per_op"] = (a - b) / r["ops"]
        res[(r["system"], r["op"], r["clients"])] = r
    started = started or d.get("started")
doc = {"schema": 1, "tool": "nimbus bench", "command": ["scripts/bench-pg.sh"],
       "started": started or datetime.datetime.utcnow().isoformat() + "Z",
       "host": {"os": "linux", "arch": platform.machine(), "cpus": cpus, "go": ""},
       "files": int(files), "duration": duration, "results": list(res.values())}
json.dump(doc, open(os.path.join(out, "pg-bench.json"), "w"), indent=1)
def tp(s, o, c):
    r = res.get((s, o, int(c)))
    return r["throughput_ops_s"] if r else None
def f(v):
    return "–" if v is None else f"{v:,.0f}"
L = [f"`scripts/bench-pg.sh`: {files} files, {duration} a point, {cpus} cores, everything on this machine.", "",
     "| op | clients | Nimbus on Pebble ops/s | Nimbus on PostgreSQL ops/s | round trips/op (PostgreSQL) |", "|---|---:|---:|---:|---:|"]
for o in ops:
    for c in clients:
        r = res.get(("postgres", o, int(c)), {})
        rt = r.get("pg_round_trips_per_op")
        L.append(f"| {o} | {c} | {f(tp('pebble', o, c))} | {f(tp('postgres', o, c))} | {'–' if rt is None else f'{rt:.2f}'} |")
L += ["", "| pgbench (same cluster, same run), tps | " + " | ".join(f"{c} clients" for c in clients) + " |", "|---|" + "---:|" * len(clients)]
names = {"select-only": "`-S -M prepared`", "tpcb": "TPC-B-like (default script)", "nimbus-stat": "stat.sql (Nimbus's stat statement)", "nimbus-create": "create.sql (Nimbus's create statements)"}
for n, label in names.items():
    L.append(f"| {label} | " + " | ".join(f(tp("pgbench", n, c)) for c in clients) + " |")
L += ["", "| ratio Nimbus on PostgreSQL / pgbench of the same statements | " + " | ".join(f"{c} clients" for c in clients) + " |", "|---|" + "---:|" * len(clients)]
for o in ("stat", "create"):
    cells = []
    for c in clients:
        a, b = tp("postgres", o, c), tp("pgbench", "nimbus-" + o, c)
        cells.append("–" if not a or not b else f"{a / b:.2f}×")
    L.append(f"| {o} | " + " | ".join(cells) + " |")
open(os.path.join(out, "pg-bench.md"), "w").write("\n".join(L) + "\n")
print("\n".join(L))
PY
# The CPU split of each sampled point (% of one core; 200 = both).
python3 - "$OUT/pg-bench-cpu.txt" <<'PY' | tee -a "$OUT/pg-bench.md"
import sys
cols = ["nimbus server", "bench driver", "postgres", "pgbench", "other processes"]
print("\n| point: CPU over 3 s, % of one core (200 = both cores) | " + " | ".join(cols) + " |")
print("|---|" + "---:|" * len(cols))
for line in open(sys.argv[1]):
    name, *kv = line.rstrip("\n").split("\t")
    d = dict(x.split("=") for x in kv)
    print(f"| {name} | " + " | ".join(d.get(c, "0") for c in cols) + " |")
PY
# The start of both statement logs, as evidence of what the scripts were checked against.
head -n 400 "$WORK/stat.log" >"$OUT/statement-log-stat.txt"
head -n 600 "$WORK/create.log" >"$OUT/statement-log-create.txt"
rm -f "$OUT"/raw-*.json "$OUT"/rt-*.txt
log "done: $OUT/pg-bench.md, $OUT/pg-bench.json"

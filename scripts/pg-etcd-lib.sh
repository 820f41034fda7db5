# Sourced by the benchmark scripts that run NameNodes over PostgreSQL and etcd
# (bench-cache-pg.sh, bench-elastic.sh, bench-profiles.sh, bench-spotify-ceiling.sh): start_pg_etcd starts a
# private PostgreSQL cluster and one etcd member (scripts/pg.sh, scripts/etcd.sh, which
# read NIMBUS_PG_DIR, NIMBUS_PG_PORT, NIMBUS_ETCD_DIR and NIMBUS_ETCD_PORT) and sets
#   URL    the cluster's postgres database (what psql administers it through)
#   PG_BASE postgres://USER@HOST:PORT, to which a script appends /DB?sslmode=disable
#   COORD  etcd://HOST:PORT, the --coordinator URL
# On exit the server whose pid is in SERVER (if any), etcd and PostgreSQL are stopped.
# profile_flags P prints the `nimbus serve` flags of `nimbus bench --profile P` (with $BIN).
# serve_fresh DB LOG ARGS... and settle_db DB: a server on a fresh database, and that database
# settled after a prepare (with $BIN, $WORK, $ADDR and the script's die).

SERVER=""

stop_pg_etcd() {
  [[ -n "$SERVER" ]] && { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true; }
  scripts/etcd.sh stop >/dev/null 2>&1 || true
  scripts/pg.sh stop || true
}

start_pg_etcd() {
  URL="$(scripts/pg.sh start)"
  COORD="$(scripts/etcd.sh start)"
  PG_BASE="${URL%%/postgres\?*}"
  trap stop_pg_etcd EXIT
}

# profile_flags P: the profile's server flags, as the bench prints them when it has no target.
profile_flags() {
  case $1 in
  hopsfs) echo "--cache-bytes 0" ;;
  hopsfs-cache) echo "--cache-bytes $((256 << 20))" ;;
  *)
    { "$BIN" bench spotify --profile "$1" --duration 1s --interval 1s 2>&1 >/dev/null || true; } |
      sed -n 's/.*start `nimbus serve \(.*\) --store postgres.*/\1/p' | head -1
    ;;
  esac
}

# serve_fresh DB LOG ARGS...: a fresh database DB and data directory ($WORK/data), and
# `nimbus serve` on $ADDR over them with ARGS (its output in LOG, its pid in SERVER); returns once
# it answers /readyz.
serve_fresh() {
  local db=$1 out=$2
  shift 2
  psql -q "$URL" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  rm -rf "$WORK/data"
  "$BIN" serve --data "$WORK/data" --listen "$ADDR" --log-level warn --store "$PG_BASE/$db?sslmode=disable" "$@" >"$out" 2>&1 &
  SERVER=$!
  for _ in $(seq 200); do curl -sf "http://$ADDR/readyz" >/dev/null && return 0; sleep 0.1; done
  die "the server did not start: $(tail -3 "$out")"
}

# settle_db DB: after a prepare, VACUUM (ANALYZE) and CHECKPOINT, so that autovacuum's and the
# checkpointer's work from its writes does not land in the first timed run (a first read run 4x
# slower than the next, in whichever configuration went first); prints the load average.
settle_db() {
  psql -q "$PG_BASE/$1?sslmode=disable" -c "VACUUM (ANALYZE) nimbus_kv" -c "CHECKPOINT"
  uptime | sed 's/^/load: /' >&2
}

# Sourced by the benchmark scripts that run NameNodes over PostgreSQL and etcd
# (bench-cache-pg.sh, bench-elastic.sh, bench-profiles.sh): start_pg_etcd starts a
# private PostgreSQL cluster and one etcd member (scripts/pg.sh, scripts/etcd.sh, which
# read NIMBUS_PG_DIR, NIMBUS_PG_PORT, NIMBUS_ETCD_DIR and NIMBUS_ETCD_PORT) and sets
#   URL    the cluster's postgres database (what psql administers it through)
#   PG_BASE postgres://USER@HOST:PORT, to which a script appends /DB?sslmode=disable
#   COORD  etcd://HOST:PORT, the --coordinator URL
# On exit the server whose pid is in SERVER (if any), etcd and PostgreSQL are stopped.
# profile_flags P prints the `nimbus serve` flags of `nimbus bench --profile P` (with $BIN).

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

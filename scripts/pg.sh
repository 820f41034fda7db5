#!/usr/bin/env bash
# scripts/pg.sh start|stop|url — a private PostgreSQL cluster for tests,
# benchmarks and trying `nimbus serve --store postgres://...`.
#
#   start  installs PostgreSQL with apt-get if it is missing and we are root
#          (apt-get update first; the package is `postgresql`, which is
#          PostgreSQL 15 on Debian 12), initialises a cluster in
#          $NIMBUS_PG_DIR (default /tmp/nimbus-pg) owned by an unprivileged
#          user (postgres when run as root: the server refuses root), starts
#          it on 127.0.0.1 and the first free port from $NIMBUS_PG_PORT
#          (default 55432), with trust authentication for loopback, and
#          prints its URL. Already running: prints the URL.
#   url    prints the URL of the running cluster.
#   stop   stops the cluster and removes its directory.
#
# The URL names the maintenance database `postgres` as superuser postgres:
# the store tests take it as NIMBUS_TEST_PG and create their own databases;
# for a server, create one: psql "$(scripts/pg.sh url)" -c 'CREATE DATABASE nimbus'.
set -euo pipefail

dir=${NIMBUS_PG_DIR:-/tmp/nimbus-pg}
data=$dir/data

die() { echo "pg.sh: $*" >&2; exit 1; }

bindir() {
  local d
  if command -v pg_ctl >/dev/null && [[ -x "$(dirname "$(command -v pg_ctl)")/initdb" ]]; then
    dirname "$(command -v pg_ctl)"
    return
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    [[ -x $d/initdb ]] && { echo "$d"; return; }
  done
}

# as runs a PostgreSQL program as the cluster's owner.
as() {
  if [[ $(id -u) == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

install_pg() {
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null ||
    die "PostgreSQL is not installed: install postgresql-15 (apt-get install postgresql), or run this as root"
  echo "pg.sh: installing PostgreSQL with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # Debian's package tries to start a cluster of its own with systemd or
  # init scripts; where there is neither, that fails harmlessly.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 >/dev/null
}

running() { [[ -f $dir/url ]] && as "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; }

free_port() {
  local p=${NIMBUS_PG_PORT:-55432}
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do
    p=$((p + 1))
  done
  echo "$p"
}

cmd=${1:-}
case $cmd in
start)
  bin=$(bindir)
  if [[ -z $bin ]]; then
    install_pg
    bin=$(bindir)
    [[ -n $bin ]] || die "apt-get installed no PostgreSQL server binaries"
  fi
  if running; then
    cat "$dir/url"
    exit 0
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  [[ $(id -u) == 0 ]] && chown postgres: "$dir"
  (cd / && as "$bin/initdb" -D "$data" -A trust -U postgres -E UTF8 --no-sync >"$dir/initdb.log" 2>&1) ||
    { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  port=$(free_port)
  (cd / && as "$bin/pg_ctl" -D "$data" -l "$dir/log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null) ||
    { cat "$dir/log" >&2; die "the server did not start"; }
  echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable" | as tee "$dir/url" >/dev/null
  cat "$dir/url"
  ;;
url)
  [[ -f $dir/url ]] || die "no cluster in $dir: run scripts/pg.sh start"
  cat "$dir/url"
  ;;
stop)
  bin=$(bindir)
  if [[ -n $bin && -d $data ]]; then
    (cd / && as "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1) || true
  fi
  rm -rf "$dir"
  ;;
*)
  die "usage: scripts/pg.sh start|stop|url"
  ;;
esac

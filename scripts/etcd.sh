#!/usr/bin/env bash
# scripts/etcd.sh start [N]|stop|url — a private etcd cluster for trying
# `nimbus serve --coordinator etcd://...` and for tests against an external
# server (NIMBUS_TEST_ETCD=$(scripts/etcd.sh endpoints)).
#
#   start [N]  installs etcd with apt-get if it is missing and we are root
#              (the package is etcd-server: etcd 3.4 on Debian 12), starts N
#              members (default 1) on 127.0.0.1, client and peer ports from
#              the first free ones at $NIMBUS_ETCD_PORT (default 52379), data
#              and logs in $NIMBUS_ETCD_DIR (default /tmp/nimbus-etcd), waits
#              until the cluster has a leader, and prints its --coordinator
#              URL. Already running: prints the URL.
#   url        prints etcd://HOST:PORT,... of the running cluster.
#   endpoints  prints HOST:PORT,... (for NIMBUS_TEST_ETCD).
#   stop       kills the members and removes the directory.
#
# internal/etcdtest starts clusters of its own for the Go tests; this script
# is for people and for CI's prerequisites (scripts/test.sh).
set -euo pipefail

dir=${NIMBUS_ETCD_DIR:-/tmp/nimbus-etcd}

die() { echo "etcd.sh: $*" >&2; exit 1; }

bin() {
  if [[ -n ${NIMBUS_ETCD_BIN:-} ]]; then echo "$NIMBUS_ETCD_BIN"; return; fi
  command -v etcd 2>/dev/null || { [[ -x /usr/bin/etcd ]] && echo /usr/bin/etcd; } || true
}

install_etcd() {
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null ||
    die "etcd is not installed: apt-get install etcd-server (Debian), or run this as root"
  echo "etcd.sh: installing etcd with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # The package enables a systemd unit; where there is no systemd nothing
  # starts, and this script starts its own members.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running() {
  [[ -f $dir/endpoints ]] || return 1
  local f
  for f in "$dir"/*.pid; do
    [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null || return 1
  done
}

healthy() { curl -sf "http://$1/health" 2>/dev/null | grep -q '"health":"true"'; }

cmd=${1:-}
case $cmd in
start)
  n=${2:-1}
  [[ $n =~ ^[1-9]$ ]] || die "start N: N is 1 to 9"
  etcd=$(bin)
  if [[ -z $etcd ]]; then
    install_etcd
    etcd=$(bin)
    [[ -n $etcd ]] || die "apt-get installed no etcd binary"
  fi
  command -v curl >/dev/null || die "curl is needed to check the members' health"
  if running; then
    sed 's/^/etcd:\/\//' "$dir/endpoints"
    exit 0
  fi
  "$0" stop
  mkdir -p "$dir"
  p=${NIMBUS_ETCD_PORT:-52379}
  clients=() peers=() initial=()
  for ((i = 0; i < n; i++)); do
    while ! port_free "$p"; do p=$((p + 1)); done
    clients+=("127.0.0.1:$p"); p=$((p + 1))
    while ! port_free "$p"; do p=$((p + 1)); done
    peers+=("127.0.0.1:$p"); p=$((p + 1))
    initial+=("m$i=http://${peers[i]}")
  done
  cluster=$(IFS=,; echo "${initial[*]}")
  for ((i = 0; i < n; i++)); do
    (cd "$dir" && exec setsid "$etcd" --name "m$i" --data-dir "$dir/m$i.etcd" \
      --listen-client-urls "http://${clients[i]}" --advertise-client-urls "http://${clients[i]}" \
      --listen-peer-urls "http://${peers[i]}" --initial-advertise-peer-urls "http://${peers[i]}" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "nimbus-$$" \
      --logger zap --log-outputs stderr >"$dir/m$i.log" 2>&1 </dev/null) &
    echo $! >"$dir/m$i.pid"
  done
  for ((i = 0; i < n; i++)); do
    for _ in $(seq 1 300); do
      healthy "${clients[i]}" && break
      kill -0 "$(cat "$dir/m$i.pid")" 2>/dev/null || { tail -20 "$dir/m$i.log" >&2; die "member m$i exited"; }
      sleep 0.1
    done
    healthy "${clients[i]}" || { tail -20 "$dir/m$i.log" >&2; die "member m$i not healthy after 30 s"; }
  done
  (IFS=,; echo "${clients[*]}") >"$dir/endpoints"
  sed 's/^/etcd:\/\//' "$dir/endpoints"
  ;;
url)
  [[ -f $dir/endpoints ]] || die "no cluster in $dir: run scripts/etcd.sh start"
  sed 's/^/etcd:\/\//' "$dir/endpoints"
  ;;
endpoints)
  [[ -f $dir/endpoints ]] || die "no cluster in $dir: run scripts/etcd.sh start"
  cat "$dir/endpoints"
  ;;
stop)
  if [[ -d $dir ]]; then
    for f in "$dir"/*.pid; do
      [[ -f $f ]] || continue
      pid=$(cat "$f")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$dir"
  fi
  ;;
*)
  die "usage: scripts/etcd.sh start [N]|stop|url|endpoints"
  ;;
esac

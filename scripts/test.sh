#!/usr/bin/env bash
# scripts/test.sh: install what the tests need and run them all. This is the
# README's test command, and what CI (.ci/run) runs on a fresh machine.
#
# Stages (each prints a banner; any failure stops the run with a non-zero exit):
#   go      go vet, then `go test -race` over every package (unit, store
#           conformance on Pebble and on a private PostgreSQL cluster, model
#           and e2e tests that start the real binary), then the coherence
#           simulator's full million operations without -race (under -race
#           TestSimulate runs a 25th of them)
#   fuzz    each native fuzz target for a fixed number of executions
#           (FUZZTIME, default 30000x; a count, not a duration: with a duration,
#           Go before 1.27 can fail a target with a bare "context deadline
#           exceeded" when the deadline races a busy worker, go.dev/issue/75804)
#   bench   `nimbus bench` smoke runs of every workload, JSON checked
#   clients real WebHDFS clients against a real `nimbus serve` on 127.0.0.1:
#           Python's `hdfs` package and fsspec/pandas (tests/python, in a venv),
#           Hadoop 3.4.1's `hadoop fs` and FileSystem contract suites
#           (tests/hadoop; needs Java 17 and Maven, jars from Maven Central)
#   firsthour  the README's first command block and its tour, extracted from
#           README.md and run as written in a scratch copy, in a clean HOME
#           with USER unset (scripts/firsthour.sh, under a minute)
# Choose stages with STAGES="go fuzz" (default: all), client suites with
# CLIENT_SUITES="python" (default: "python hadoop").
#
# Every prerequisite of the chosen stages is checked first, in seconds: Go
# 1.26+, a C compiler (go test -race needs cgo), the PostgreSQL server
# (postgresql: the store tests start a cluster as user postgres), the etcd
# server (etcd-server: the coordinator tests start clusters of it), a
# headless browser (chromium: the status page's test drives it), iproute2
# (ip: internal/netzone makes availability zones of network namespaces), python3
# with venv, curl, Java 17+ and Maven. Run as root where apt-get exists (CI on a fresh
# Debian machine), the missing ones are installed; otherwise the script
# stops at once and says how to install them.
set -euo pipefail
cd "$(dirname "$0")/.."

STAGES=${STAGES:-"firsthour go fuzz bench clients"}
CLIENT_SUITES=${CLIENT_SUITES:-"python hadoop"}
FUZZTIME=${FUZZTIME:-30000x}
export GOFLAGS=${GOFLAGS:--buildvcs=false}

banner() { printf '\n==== %s ====\n' "$*"; }

# What an EXIT trap cleans up, whichever way the script ends: a trap on
# RETURN would be skipped when set -e stops the script inside a stage.
cleanup_pids=()
cleanup_dirs=()
cleanup() {
  local p d
  for p in "${cleanup_pids[@]}"; do
    kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  for d in "${cleanup_dirs[@]}"; do
    rm -rf "$d"
  done
  return 0
}
trap cleanup EXIT

has() { [[ " $1 " == *" $2 "* ]]; }

# need_tools checks every prerequisite of the chosen stages and client
# suites; missing ones are installed with apt-get where that is possible
# (root, apt-get present), else listed with how to install them.
need_tools() {
  local missing=() pkgs=()
  if ! command -v go >/dev/null; then
    missing+=("Go 1.26 or newer: https://go.dev/doc/install (Debian's golang package is older)")
  elif ! go version | grep -Eq 'go1\.(2[6-9]|[3-9][0-9])'; then
    missing+=("Go 1.26 or newer (found: $(go version)): https://go.dev/doc/install")
  fi
  if has "$STAGES" go && ! command -v "${CC:-gcc}" >/dev/null && ! command -v cc >/dev/null; then
    missing+=("a C compiler for go test -race: apt-get install gcc"); pkgs+=(gcc)
  fi
  # The store tests run against a real PostgreSQL: internal/pgtest starts a
  # private cluster with the server binaries (Debian keeps them off PATH).
  if has "$STAGES" go && ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    missing+=("the PostgreSQL server for the store tests: apt-get install postgresql"); pkgs+=(postgresql)
  fi
  # The coordinator tests run against real etcd servers (one member, and a
  # 3-member cluster that loses one): internal/etcdtest starts them with
  # the etcd binary (Debian's etcd-server, etcd 3.4).
  if has "$STAGES" go && ! command -v etcd >/dev/null && [[ -z ${NIMBUS_ETCD_BIN:-} ]]; then
    missing+=("the etcd server for the coordinator tests: apt-get install etcd-server"); pkgs+=(etcd-server)
  fi
  # The status page's test (server.TestStatusPageInBrowser) loads the page
  # in a real headless browser over the DevTools protocol: Debian's chromium.
  if has "$STAGES" go && [[ -z ${NIMBUS_CHROMIUM:-} ]] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    missing+=("a headless browser for the status page's test: apt-get install chromium"); pkgs+=(chromium)
  fi
  # Availability zones for the DataNode and NameNode tests are network
  # namespaces (internal/netzone), made with iproute2's ip.
  if has "$STAGES" go && ! command -v ip >/dev/null; then
    missing+=("iproute2 for the zone tests' network namespaces: apt-get install iproute2"); pkgs+=(iproute2)
  fi
  if has "$STAGES" bench || has "$STAGES" clients || has "$STAGES" firsthour; then
    command -v python3 >/dev/null || { missing+=("python3: apt-get install python3"); pkgs+=(python3); }
  fi
  if has "$STAGES" clients || has "$STAGES" firsthour; then
    command -v curl >/dev/null || { missing+=("curl: apt-get install curl"); pkgs+=(curl); }
  fi
  if has "$STAGES" clients && has "$CLIENT_SUITES" python; then
    python3 -c 'import ensurepip, venv' 2>/dev/null || { missing+=("python3's venv: apt-get install python3-venv"); pkgs+=(python3-venv); }
  fi
  if has "$STAGES" clients && has "$CLIENT_SUITES" hadoop; then
    local jv
    jv=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
    if [[ -z "$jv" || "$jv" -lt 17 ]]; then
      missing+=("Java 17 or newer (found: ${jv:-none}): apt-get install openjdk-17-jdk-headless"); pkgs+=(openjdk-17-jdk-headless)
    fi
    command -v mvn >/dev/null || { missing+=("Maven: apt-get install maven"); pkgs+=(maven); }
  fi
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  if ((${#pkgs[@]} == ${#missing[@]})) && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "test.sh: installing ${pkgs[*]} with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
    return 0
  fi
  echo "test.sh: missing prerequisites of the stages \"$STAGES\":" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
}

need_go() {
  go mod download
}

stage_go() {
  banner "go vet"
  go vet ./...
  banner "go test -race ./..."
  # need_tools installed etcd and chromium: their tests must run, not skip.
  # The zone tests need root (network namespaces): as root (CI) they must
  # run too; otherwise they skip and say why.
  local netns=""
  if [[ $(id -u) == 0 ]]; then
    netns=1
  else
    echo "test.sh: not root: the zone tests (internal/netzone and its users) skip" >&2
  fi
  NIMBUS_REQUIRE_ETCD=1 NIMBUS_REQUIRE_CHROMIUM=1 NIMBUS_REQUIRE_NETNS=$netns go test -race -count=1 -timeout 30m ./...
  banner "coherence simulator: a million operations, and a thousand instances, without -race"
  go test -count=1 -timeout 10m -run '^TestSimulate(ThousandInstances)?$' -v ./coherence/sim
}

stage_fuzz() {
  banner "fuzz targets, $FUZZTIME each"
  # package path and target name of every Fuzz function
  grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
    pkg=$(dirname "$f")
    for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
      echo "-- $pkg $target"
      go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" "$pkg"
    done
  done
}

stage_bench() {
  banner "nimbus bench smoke runs"
  SECS=${SECS:-2} bash bench/smoke.sh
}

stage_clients() {
  banner "WebHDFS clients against nimbus serve"
  local work port pid
  work=$(mktemp -d)
  cleanup_dirs+=("$work")
  go build -o "$work/nimbus" ./cmd/nimbus
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # Default settings: files over 128 KB go to block storage, and the suites'
  # small block sizes give files of many blocks. Those sizes (1 KB in
  # Hadoop's FileSystemContractBaseTest and the Python checksum test) are
  # under HDFS's 1 MB minimum, which HDFS's own test configurations lower to
  # 0 as this does.
  "$work/nimbus" serve --data "$work/data" --listen "127.0.0.1:$port" --min-block-size 0 >"$work/serve.log" 2>&1 &
  pid=$!
  cleanup_pids+=("$pid")
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$work/serve.log"; return 1; }
  for s in $CLIENT_SUITES; do
    "suite_$s" "127.0.0.1:$port"
  done
  NIMBUS_ADDR="http://127.0.0.1:$port" "$work/nimbus" fsck
}

suite_python() {
  banner "Python clients (hdfs, fsspec, pandas)"
  NIMBUS_WEBHDFS="$1" bash tests/python/run.sh
}

suite_hadoop() {
  banner "Hadoop clients (hadoop fs, contract suites)"
  bash tests/hadoop/run.sh "$1"
  banner "hdfs:// over Hadoop IPC: hadoop fs against nimbus serve's Hadoop RPC port (its own server)"
  bash tests/hadoop/hdfsrpc.sh
  banner "DataTransferProtocol: Hadoop's client classes against Nimbus DataNodes, Nimbus's client against Hadoop's DataNodes"
  NIMBUS_HADOOP_INTEROP=1 go test -count=1 -run '^(TestHadoopInterop|TestJavaDataNodes)$' ./dataxfer/
}

stage_firsthour() {
  banner "the README's first hour (scripts/firsthour.sh)"
  bash scripts/firsthour.sh
}

need_tools
need_go
for s in $STAGES; do
  "stage_$s"
done
banner "all stages passed: $STAGES"

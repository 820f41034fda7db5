#!/usr/bin/env bash
# scripts/test.sh: install what the tests need and run them all. This is the
# README's test command, and what CI (.ci/run) runs on a fresh machine.
#
# Stages (each prints a banner; any failure stops the run with a non-zero exit):
#   go      go vet, then `go test -race` over every package (unit, store
#           conformance, model and e2e tests that start the real binary)
#   fuzz    each native fuzz target for a fixed number of executions
#           (FUZZTIME, default 30000x; a count, not a duration: with a duration,
#           Go before 1.27 can fail a target with a bare "context deadline
#           exceeded" when the deadline races a busy worker, go.dev/issue/75804)
#   bench   `nimbus bench` smoke runs of every workload, JSON checked
#   clients real WebHDFS clients against a real `nimbus serve` on 127.0.0.1:
#           Python's `hdfs` package and fsspec/pandas (tests/python, in a venv),
#           Hadoop 3.4.1's `hadoop fs` and FileSystem contract suites
#           (tests/hadoop; needs Java 17 and Maven, jars from Maven Central)
# Choose stages with STAGES="go fuzz" (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."

STAGES=${STAGES:-"go fuzz bench clients"}
FUZZTIME=${FUZZTIME:-30000x}
export GOFLAGS=${GOFLAGS:--buildvcs=false}

banner() { printf '\n==== %s ====\n' "$*"; }

need_go() {
  if ! command -v go >/dev/null; then
    echo "test.sh: Go is not installed; install Go 1.26 or newer" >&2
    exit 1
  fi
  go mod download
}

stage_go() {
  banner "go vet"
  go vet ./...
  banner "go test -race ./..."
  go test -race -count=1 -timeout 30m ./...
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
  go build -o "$work/nimbus" ./cmd/nimbus
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # Default settings: files over 128 KB go to block storage, and the suites'
  # small block sizes give files of many blocks.
  "$work/nimbus" serve --data "$work/data" --listen "127.0.0.1:$port" >"$work/serve.log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' RETURN
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$work/serve.log"; return 1; }
  banner "Python clients (hdfs, fsspec, pandas)"
  NIMBUS_WEBHDFS="127.0.0.1:$port" bash tests/python/run.sh
  banner "Hadoop clients (hadoop fs, contract suites)"
  bash tests/hadoop/run.sh "127.0.0.1:$port"
  NIMBUS_ADDR="http://127.0.0.1:$port" "$work/nimbus" fsck
}

need_go
for s in $STAGES; do
  "stage_$s"
done
banner "all stages passed: $STAGES"

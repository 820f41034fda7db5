#!/usr/bin/env bash
# scripts/test.sh: install what the tests need and run them all. This is the
# README's test command, and what CI (.ci/run) runs on a fresh machine.
#
# Stages (each prints a banner; any failure stops the run with a non-zero exit):
#   go      go vet, then `go test -race` over every package (unit, store
#           conformance, model and e2e tests that start the real binary)
#   fuzz    each native fuzz target for a few seconds (FUZZTIME, default 5s)
#   bench   `nimbus bench` smoke runs of every workload, JSON checked
# Choose stages with STAGES="go fuzz" (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."

STAGES=${STAGES:-"go fuzz bench"}
FUZZTIME=${FUZZTIME:-5s}
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

need_go
for s in $STAGES; do
  "stage_$s"
done
banner "all stages passed: $STAGES"

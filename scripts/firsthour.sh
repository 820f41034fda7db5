#!/usr/bin/env bash
# scripts/firsthour.sh: a newcomer's first hour, checked. It runs, as written
# in README.md (extracted, never copied here):
#   1. the first ```sh block under "## The two commands" (build, start the
#      server in the background, first commands),
#   2. the first ```sh block under "## A tour of `nimbus fs`",
#   3. the second ```sh block under "## The two commands" (stop the server),
# each with `bash -euo pipefail` in a scratch copy of the work tree (a git
# repository of its own), with a clean temporary HOME and USER unset, as in
# a container or CI; `./nimbus version` must name the copy's commit. It fails when
# any command fails, and stops the server it started whatever happens.
#
# The Go module and build caches are kept (GOMODCACHE, GOCACHE), so that
# the check takes seconds, not the first build's minutes. NIMBUS_ADDR points
# both the server and the clients at a free port, so that a server of yours
# on 9870 is left alone.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
readme=${README:-$repo/README.md}

work=$(mktemp -d)
copy=$work/nimbus
cleanup() {
  local rc=$?
  # Whatever the blocks started: the daemon's pid file, then any process
  # still running the copy's binary.
  if [[ -f "$copy/nimbus-data/nimbus.pid" ]]; then
    kill "$(cat "$copy/nimbus-data/nimbus.pid")" 2>/dev/null || true
  fi
  local exe pid
  for exe in /proc/[0-9]*/exe; do
    if [[ "$(readlink "$exe" 2>/dev/null)" == "$copy/nimbus" ]]; then
      pid=${exe#/proc/}; pid=${pid%/exe}
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# block HEADING N prints the Nth ```sh block under the level-2 heading
# HEADING (up to the next level-2 heading).
block() {
  awk -v h="$1" -v n="$2" '
    /^## / { in_sec = ($0 == "## " h); next }
    in_sec && /^```sh[[:space:]]*$/ { k++; if (k == n) { on = 1; found = 1 }; next }
    on && /^```/ { exit }
    on { print }
    END { if (!found) exit 1 }
  ' "$readme"
}

first=$(block 'The two commands' 1) || { echo "firsthour: README.md has no first sh block under '## The two commands'" >&2; exit 1; }
stop=$(block 'The two commands' 2) || { echo "firsthour: README.md has no second sh block (stopping the server) under '## The two commands'" >&2; exit 1; }
tour=$(block 'A tour of `nimbus fs`' 1) || { echo "firsthour: README.md has no sh block under '## A tour of \`nimbus fs\`'" >&2; exit 1; }

# The work tree as a clone would have it (tracked and new files, not the
# ignored ones: no ./nimbus, no ./nimbus-data).
mkdir -p "$copy" "$work/home"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$repo" && git ls-files -z -co --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -C "$copy" -xf -
else
  cp -a "$repo/." "$copy/"
  rm -rf "$copy/nimbus" "$copy/nimbus-data"
fi

# A repository of its own, as a clone has: the README's `go build` stamps
# the commit into the binary (checked below).
git -C "$copy" init -q
git -C "$copy" add -A
git -C "$copy" -c user.name=firsthour -c user.email=firsthour@localhost commit -qm "the work tree, for firsthour.sh"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# A clean environment: no USER, LOGNAME or GOFLAGS; a HOME of its own.
env_clean=(env -i "PATH=$PATH" "HOME=$work/home" "TERM=dumb" "LANG=C.UTF-8"
  "GOMODCACHE=$(go env GOMODCACHE)" "GOCACHE=$(go env GOCACHE)" "GOPROXY=$(go env GOPROXY)" "GOTOOLCHAIN=local"
  "NIMBUS_ADDR=http://127.0.0.1:$port")

runblock() {
  local name=$1 script=$2 t0=$SECONDS
  printf -- '-- %s:\n%s\n' "$name" "$script"
  if ! (cd "$copy" && "${env_clean[@]}" bash -euo pipefail -c "$script") </dev/null; then
    echo "firsthour: the README's $name failed (above); the server's log:" >&2
    tail -n 30 "$copy/nimbus-data/nimbus.log" >&2 2>/dev/null || true
    exit 1
  fi
  echo "-- $name: ok in $((SECONDS - t0)) s"
}

runblock "first command block" "$first"
if ! "$copy/nimbus" version | grep -q "commit $(git -C "$copy" rev-parse --short=12 HEAD)"; then
  echo "firsthour: the README's build does not stamp the commit: $("$copy/nimbus" version)" >&2
  exit 1
fi
runblock "tour of nimbus fs" "$tour"
runblock "stop block" "$stop"
if [[ -f "$copy/nimbus-data/nimbus.pid" ]] || curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
  echo "firsthour: the server still runs after the README's stop command" >&2
  exit 1
fi
echo "firsthour: the README's commands work as written"

#!/usr/bin/env bash
# Runs the Python WebHDFS client suite (test_webhdfs.py): the `hdfs` package and
# fsspec/pandas against a Nimbus WebHDFS endpoint.
#
#   NIMBUS_WEBHDFS=127.0.0.1:9870 tests/python/run.sh   # against a running server
#   tests/python/run.sh                                  # starts webhdfs/internal/devserver
#
# Extra arguments go to pytest (e.g. -k checksum -x). The venv lives in
# tests/python/.venv (gitignored) and is reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$here/.venv"

if [[ ! -x "$venv/bin/pytest" ]] || ! "$venv/bin/python" -c 'import hdfs, fsspec, pandas, pyarrow, requests' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check hdfs fsspec pandas pyarrow pytest requests
fi

if [[ -z "${NIMBUS_WEBHDFS:-}" ]]; then
  tmp="$(mktemp -d)"
  trap 'kill "${pid:-}" 2>/dev/null || true; wait "${pid:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
  (cd "$root" && go build -o "$tmp/devserver" ./webhdfs/internal/devserver)
  "$tmp/devserver" -listen 127.0.0.1:0 -data "$tmp/data" -superuser "$(id -un)" \
    -port-file "$tmp/addr" 2>"$tmp/devserver.log" &
  pid=$!
  for _ in $(seq 1 100); do
    [[ -s "$tmp/addr" ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/devserver.log" >&2; exit 1; }
    sleep 0.1
  done
  [[ -s "$tmp/addr" ]] || { echo "devserver did not start" >&2; cat "$tmp/devserver.log" >&2; exit 1; }
  export NIMBUS_WEBHDFS="$(cat "$tmp/addr")"
  echo "run.sh: devserver on $NIMBUS_WEBHDFS (log: $tmp/devserver.log)"
fi

cd "$here"
"$venv/bin/pytest" -q -p no:cacheprovider test_webhdfs.py "$@"

#!/usr/bin/env bash
# Runs the Python WebHDFS client suite (test_webhdfs.py): the `hdfs` package and
# fsspec/pandas against a Nimbus WebHDFS endpoint.
#
#   NIMBUS_WEBHDFS=127.0.0.1:9870 tests/python/run.sh   # against a running server
#   tests/python/run.sh                                  # builds and starts `nimbus serve`
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
  (cd "$root" && go build -o "$tmp/nimbus" ./cmd/nimbus)
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "$tmp/nimbus" serve --data "$tmp/data" --listen "127.0.0.1:$port" >"$tmp/nimbus.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/nimbus.log" >&2; exit 1; }
    sleep 0.1
  done
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 || { echo "nimbus serve did not become ready" >&2; cat "$tmp/nimbus.log" >&2; exit 1; }
  export NIMBUS_WEBHDFS="127.0.0.1:$port"
  echo "run.sh: nimbus serve on $NIMBUS_WEBHDFS (log: $tmp/nimbus.log)"
fi

cd "$here"
"$venv/bin/pytest" -q -p no:cacheprovider test_webhdfs.py "$@"

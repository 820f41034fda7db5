#!/usr/bin/env bash
# NNThroughputBenchmark for every namespace operation at several thread counts against the running
# peer; one JSON line per run (with the load average before it) to stdout and to OUT.
#   bench/hdfs/nnthroughput-all.sh [OUT.jsonl] [THREADS...]     (FILES=20000 by default)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$HERE/results/nnthroughput-$(date +%Y%m%d-%H%M).jsonl}"; shift || true
THREADS=("$@"); [[ ${#THREADS[@]} -gt 0 ]] || THREADS=(1 4 16 64)
FILES="${FILES:-20000}"
OPS="${OPS:-create mkdirs open fileStatus rename delete}"
mkdir -p "$(dirname "$OUT")"
for op in $OPS; do
  for t in "${THREADS[@]}"; do
    load="$(cut -d' ' -f1 /proc/loadavg)"
    line="$("$HERE/nnthroughput.sh" "$op" "$t" "$FILES" 2>/dev/null | tail -1)" || { echo "nnthroughput-all: $op $t failed" >&2; continue; }
    echo "${line%\}},\"loadavg_1m\":$load,\"cores\":$(nproc)}" | tee -a "$OUT"
  done
done
echo "nnthroughput-all: results in $OUT" >&2

#!/bin/bash
# scripts/bench-ab-embedded.sh: three interleaved rounds of the embedded default, /tmp/nimbus-base against /tmp/nimbus-head
# (build them first), a fresh server per binary per round; results in /tmp/ab3.out: round binary op clients ops/s server-µs/op
out=/tmp/ab3.out; : > $out
for round in 1 2 3; do
  for b in base head; do
    rm -rf /tmp/abdata; /tmp/nimbus-$b serve --data /tmp/abdata --listen 127.0.0.1:19885 --log-level warn >/dev/null 2>&1 &
    pid=$!; sleep 0.8
    /tmp/nimbus-head bench prepare --target nimbus://127.0.0.1:19885 --files 5000 >/dev/null 2>&1
    for op in stat ls create mkdir delete rename; do
      /tmp/nimbus-head bench micro --target nimbus://127.0.0.1:19885 --op $op --clients 16,64 --duration 3s --no-echo --files 5000 2>/dev/null \
        | awk -v b=$b -v op=$op -v r=$round '$1=="micro"{print r, b, op, $4, $5, $NF}' >> $out
    done
    kill $pid; wait $pid 2>/dev/null
  done
done

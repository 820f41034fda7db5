#!/usr/bin/env bash
# A scripted `hadoop fs` session (Hadoop 3.4.1 FsShell, one JVM per command) over hdfs:// against
# Nimbus's Hadoop IPC port (ClientNamenodeProtocol, docs/HDFS-RPC.md), checking every result.
# Metadata commands only: the data path (put, cat) is not served on that port yet.
#
#   tests/hadoop/hdfsrpc.sh                    # builds nimbus, serves a fresh data dir, stops it after
#   tests/hadoop/hdfsrpc.sh 127.0.0.1:8020     # a running server's Hadoop RPC address
#
# Runs as the superuser when it starts its own server (the process's user owns "/"); against a
# running server the client's user (HADOOP_USER_NAME or `id -un`) must be its superuser for -chown.
# Works under /nimbus-hdfsrpc.<pid> and removes it at the end. Exits 1 on any mismatch, listing each.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
T="$(mktemp -d /tmp/nimbus-hdfsrpc.XXXXXX)"
PID=""
cleanup() {
  [[ -n "$PID" ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

if [[ $# -ge 1 ]]; then
  EP="${1#hdfs://}"; EP="${EP%/}"
else
  (cd "$ROOT" && go build -o "$T/nimbus" ./cmd/nimbus) || { echo "hdfsrpc: go build failed" >&2; exit 2; }
  "$T/nimbus" serve --data "$T/data" --listen 127.0.0.1:0 --hadoop-rpc-addr 127.0.0.1:0 >"$T/serve.log" 2>&1 &
  PID=$!
  EP=""
  for _ in $(seq 1 200); do
    EP="$(sed -n 's/.*msg="nimbus serving".* hadoop_rpc=\([^ ]*\).*/\1/p' "$T/serve.log" | head -1)"
    [[ -n "$EP" ]] && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$EP" ]] || { echo "hdfsrpc: nimbus serve did not start:" >&2; cat "$T/serve.log" >&2; exit 2; }
fi
URI="hdfs://$EP"
B="$URI/nimbus-hdfsrpc.$$"

CP_FILE="$HERE/target/classpath.txt"
if [[ ! -s "$CP_FILE" || "$CP_FILE" -ot "$HERE/pom.xml" ]]; then
  (cd "$HERE" && mvn -q -B -Dstyle.color=never dependency:build-classpath -Dmdep.outputFile="$CP_FILE" >&2) \
    || { echo "hdfsrpc: mvn dependency:build-classpath failed" >&2; exit 2; }
fi
CP="$HERE/conf:$(cat "$CP_FILE")"

FAILS=0; STEPS=0
OUT="$T/stdout"; ERR="$T/stderr"; RC=0
fs() {
  java -Xmx256m -XX:TieredStopAtLevel=1 -Xshare:auto \
    --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED \
    --add-opens java.base/java.net=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED \
    -Dlog4j.configuration="file:$HERE/conf/log4j.properties" \
    -cp "$CP" org.apache.hadoop.fs.FsShell "$@" >"$OUT" 2>"$ERR" </dev/null
  RC=$?
}
show() { echo "    \$ hadoop fs $*"; echo "    exit $RC"; sed 's/^/    stdout| /' "$OUT" | head -20; grep -v '^log4j' "$ERR" | sed 's/^/    stderr| /' | head -10; }
fail() { FAILS=$((FAILS+1)); echo "FAIL [$CUR]: $*"; }
ok() { echo "ok   [$CUR]"; }
step() { CUR="$1"; STEPS=$((STEPS+1)); }
must() { fs "$@"; if [[ $RC != 0 ]]; then fail "expected success: hadoop fs $*"; show "$@"; return 1; fi; return 0; }
mustnot() { local pat="$1"; shift; fs "$@"
  if [[ $RC == 0 ]]; then fail "expected failure: hadoop fs $*"; show "$@"; return 1; fi
  if ! grep -Eiq -- "$pat" "$ERR"; then fail "hadoop fs $* failed, but stderr does not match /$pat/"; show "$@"; return 1; fi
  return 0; }
eq() { if [[ "$2" != "$3" ]]; then fail "$1: got '$2', want '$3'"; return 1; fi; return 0; }
# norm: the session's paths relative to its work dir, for comparing listings
norm() { sed "s#$B##g" "$OUT"; }
ME="${HADOOP_USER_NAME:-$(id -un)}"

echo "hdfsrpc: hadoop fs session against $URI (work dir ${B#$URI})"

step "reachable"
if must -ls "$URI/"; then ok; else echo "hdfsrpc: $URI not reachable, giving up"; exit 1; fi

step "mkdir -p, mkdir without -p"
if must -mkdir -p "$B/a/b/c" "$B/a/d" && mustnot 'No such file or directory' -mkdir "$B/x/y" \
   && mustnot 'File exists' -mkdir "$B/a"; then ok; fi

step "ls -R"
if must -ls -R "$B"; then
  got="$(awk 'NF>=8 {print substr($1,1,1), $3, $NF}' "$OUT" | sed "s#$B##")"
  want="$(printf '%s\n' "d $ME /a" "d $ME /a/b" "d $ME /a/b/c" "d $ME /a/d")"
  eq "ls -R" "$got" "$want" && ok
fi

step "mv (into a directory, and a rename), mv of a missing source fails"
if must -mv "$B/a/b/c" "$B/a/d" && must -mv "$B/a/d" "$B/a/e" && mustnot 'No such file or directory' -mv "$B/nope" "$B/z"; then
  must -ls -R "$B/a"
  got="$(awk 'NF>=8 {print $NF}' "$OUT" | sed "s#$B##" | tr '\n' ' ')"
  eq "tree after mv" "$got" "/a/b /a/e /a/e/c " && ok
fi

step "chmod, chown, stat"
if must -chmod 1750 "$B/a/e" && must -chown alice:staff "$B/a/e" && must -stat '%F|%u|%g|%a|%A|%n' "$B/a/e"; then
  eq "stat" "$(cat "$OUT")" "directory|alice|staff|1750|rwxr-x--T|e" && ok
fi

step "chmod -R"
if must -chmod -R 700 "$B/a/e" && must -stat '%a' "$B/a/e/c"; then eq "mode of e/c" "$(cat "$OUT")" "700" && ok; fi

step "du, count -q"
if must -du -s "$B/a" && eq "du -s" "$(awk '{print $1, $2}' "$OUT")" "0 0" && must -count -q "$B/a"; then
  eq "count -q" "$(awk '{print $1, $2, $3, $4, $5, $6, $7}' "$OUT")" "none inf none inf 4 0 0" && ok
fi

step "setfacl, getfacl"
if must -setfacl -m user:bob:r-x,default:user:bob:r-x "$B/a/b" && must -getfacl "$B/a/b"; then
  got="$(grep -v '^# file' "$OUT" | tr '\n' ' ')"
  want="# owner: $ME # group: supergroup user::rwx user:bob:r-x group::r-x mask::r-x other::r-x default:user::rwx default:user:bob:r-x default:group::r-x default:mask::r-x default:other::r-x  "
  if eq "getfacl" "$got" "$want" && must -ls "$B/a"; then
    eq "ls marks an ACL with +" "$(awk '$NF ~ /\/b$/ {print $1}' "$OUT")" "drwxr-xr-x+" && ok
  fi
fi

step "setfacl -b"
if must -setfacl -b "$B/a/b" && must -getfacl "$B/a/b"; then
  # HDFS's removeAcl (what -b calls) removes the default ACL too
  eq "getfacl after -b" "$(grep -v '^#' "$OUT" | tr '\n' ' ')" "user::rwx group::r-x other::r-x  " && ok
fi

step "setfattr, getfattr"
if must -setfattr -n user.color -v blue "$B/a/b" && must -setfattr -n user.size -v 0x0102 "$B/a/b" \
   && must -getfattr -d -e hex "$B/a/b"; then
  got="$(grep -v '^#' "$OUT" | sort | tr '\n' ' ')"
  if eq "getfattr -d -e hex" "$got" 'user.color=0x626c7565 user.size=0x0102 ' && must -setfattr -x user.color "$B/a/b" \
     && must -getfattr -n user.size -e hex "$B/a/b"; then
    eq "getfattr -n -e hex" "$(grep -v '^#' "$OUT")" 'user.size=0x0102' && mustnot 'attributes provided was not found' -getfattr -n user.color "$B/a/b" && ok
  fi
fi

step "test -d -e"
fs -test -d "$B/a/e"; r1=$RC; fs -test -e "$B/nope"; r2=$RC
eq "test -d, -e" "$r1 $r2" "0 1" && ok

step "rm -r, rm of a non-empty directory without -r fails"
if mustnot 'Is a directory|non empty|not empty' -rm "$B/a" && must -rm -r -skipTrash "$B/a"; then
  fs -test -e "$B/a"; eq "test -e after rm -r" "$RC" 1 && ok
fi

must -rm -r -skipTrash "$B" >/dev/null
echo "hdfsrpc: $((STEPS - FAILS))/$STEPS checks passed"
[[ $FAILS == 0 ]]

#!/usr/bin/env bash
# A scripted `hadoop fs` session (Hadoop 3.4.1 FsShell, one JVM per command as a user would run it)
# against webhdfs://ENDPOINT, checking every result: bytes compared with the local source, listings
# and -du/-count/-stat output parsed, exit codes of -test and of commands that must fail.
#
#   tests/hadoop/fsshell.sh 127.0.0.1:9870            # Nimbus
#   tests/hadoop/fsshell.sh 127.0.0.1:9871            # the HDFS peer (bench/hdfs)
#
# Works under /nimbus-fsshell.<pid> on the server and removes it at the end. Needs superuser for
# -chown (the client's user, `id -un` or HADOOP_USER_NAME). Exits 1 on any mismatch, listing each.
# Environment: FSSHELL_BLOCKSIZE (default 1048576) block size for the multi-block file;
# FSSHELL_ONLY=acl runs only the ACL/xattr checks; FSSHELL_CAPTURE=DIR also writes every normalized
# output compared with tests/hadoop/expected/ into DIR (how the expected files were taken from HDFS).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EP="${1:?usage: $0 HOST:PORT}"
EP="${EP#webhdfs://}"; EP="${EP#http://}"; EP="${EP%/}"
URI="webhdfs://$EP"
B="$URI/nimbus-fsshell.$$"
BS="${FSSHELL_BLOCKSIZE:-1048576}"
T="$(mktemp -d /tmp/nimbus-fsshell.XXXXXX)"
CP_FILE="$HERE/target/classpath.txt"

if [[ ! -s "$CP_FILE" || "$CP_FILE" -ot "$HERE/pom.xml" ]]; then
  (cd "$HERE" && mvn -q -B -Dstyle.color=never dependency:build-classpath -Dmdep.outputFile="$CP_FILE" >&2) \
    || { echo "fsshell: mvn dependency:build-classpath failed" >&2; exit 2; }
fi
CP="$HERE/conf:$(cat "$CP_FILE")"

FAILS=0; STEPS=0; T0=$SECONDS
OUT="$T/stdout"; ERR="$T/stderr"; RC=0

# fs ARGS...: run `hadoop fs ARGS` (stdout to $OUT, stderr to $ERR, exit code to $RC)
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
# step NAME: start a check
step() { CUR="$1"; STEPS=$((STEPS+1)); }

# must ARGS...: command must succeed
must() { fs "$@"; if [[ $RC != 0 ]]; then fail "expected success: hadoop fs $*"; show "$@"; return 1; fi; return 0; }
# mustnot PATTERN ARGS...: command must fail, stderr matching PATTERN (egrep, case-insensitive)
mustnot() { local pat="$1"; shift; fs "$@"
  if [[ $RC == 0 ]]; then fail "expected failure: hadoop fs $*"; show "$@"; return 1; fi
  if ! grep -Eiq -- "$pat" "$ERR"; then fail "hadoop fs $* failed, but stderr does not match /$pat/"; show "$@"; return 1; fi
  return 0; }
# test_rc EXPECTED FLAG PATH
test_rc() { fs -test "$2" "$3"; if [[ $RC != "$1" ]]; then fail "-test $2 ${3#$URI}: exit $RC, expected $1"; show -test "$2" "$3"; return 1; fi; return 0; }
# same_bytes LOCAL_EXPECTED LOCAL_GOT
same_bytes() { if ! cmp -s "$1" "$2"; then fail "bytes differ: $(basename "$1") ($(stat -c %s "$1") B) vs $(basename "$2") ($(stat -c %s "$2") B): $(cmp "$1" "$2" 2>&1 | head -1)"; return 1; fi; return 0; }
# eq WHAT GOT WANT
eq() { if [[ "$2" != "$3" ]]; then fail "$1: got '$2', want '$3'"; return 1; fi; return 0; }
# stat_of FORMAT PATH -> echo value
stat_of() { fs -stat "$1" "$2"; [[ $RC == 0 ]] || { show -stat "$1" "$2"; echo "<stat failed>"; return 1; }; cat "$OUT"; }

cleanup() { fs -rm -r -f -skipTrash "$B" >/dev/null 2>&1; rm -rf "$T"; }
trap cleanup EXIT

echo "fsshell: hadoop fs session against $URI (work dir ${B#$URI})"

# Local sources: 0 B, text, a file over the 128 KB inline threshold, and a multi-block file whose
# size is not a multiple of the 512-byte checksum chunk.
: > "$T/empty.bin"
printf 'hello nimbus\nzweite Zeile: grüße\n' > "$T/one.txt"
head -c 200000 /dev/urandom > "$T/mid.bin"
head -c $((2 * BS + 777)) /dev/urandom > "$T/big.bin"
SZ_ONE=$(stat -c %s "$T/one.txt"); SZ_MID=200000; SZ_BIG=$((2 * BS + 777))

step "reachable"
if must -ls "$URI/"; then ok; else echo "fsshell: $URI not reachable, giving up"; exit 1; fi

if [[ "${FSSHELL_ONLY:-}" != acl ]]; then
step "mkdir -p"
if must -mkdir -p "$B/dir/sub/deep" && test_rc 0 -d "$B/dir/sub/deep" && test_rc 0 -d "$B/dir"; then ok; fi

step "mkdir existing without -p fails"
mustnot 'exists' -mkdir "$B/dir" && ok

step "put (several sources into a directory)"
if must -put "$T/empty.bin" "$T/one.txt" "$T/mid.bin" "$B/dir/"; then ok; fi

step "put multi-block file (-D dfs.blocksize=$BS)"
if must -D dfs.blocksize="$BS" -put "$T/big.bin" "$B/dir/sub/big.bin"; then
  st="$(stat_of '%o %b %F' "$B/dir/sub/big.bin")"
  eq "block size, length, type of big.bin" "$st" "$BS $SZ_BIG regular file" && ok
fi

step "put over an existing file fails, -put -f overwrites"
if mustnot 'exists' -put "$T/mid.bin" "$B/dir/one.txt" && must -put -f "$T/one.txt" "$B/dir/one.txt"; then ok; fi

step "test -e -f -d -z -s"
r=0
test_rc 0 -e "$B/dir/one.txt" || r=1
test_rc 0 -f "$B/dir/one.txt" || r=1
test_rc 1 -d "$B/dir/one.txt" || r=1
test_rc 1 -f "$B/dir" || r=1
test_rc 0 -z "$B/dir/empty.bin" || r=1
test_rc 1 -z "$B/dir/one.txt" || r=1
test_rc 0 -s "$B/dir/mid.bin" || r=1
test_rc 1 -e "$B/dir/no-such-file" || r=1
[[ $r == 0 ]] && ok

step "ls (entries, types, sizes, owner)"
if must -ls "$B/dir"; then
  got="$(awk 'NF>=8 && $1 ~ /^[-d]/ { n=$NF; sub(/.*\//,"",n); print substr($1,1,1), $5, n }' "$OUT" | sort)"
  want="$(printf '%s\n' "- 0 empty.bin" "- $SZ_MID mid.bin" "- $SZ_ONE one.txt" "d 0 sub" | sort)"
  n="$(sed -n 's/^Found \([0-9]*\) items$/\1/p' "$OUT")"
  owner="$(awk '$NF ~ /one.txt$/ {print $3}' "$OUT")"
  if eq "ls entries" "$got" "$want" && eq "'Found N items'" "$n" 4 && eq "owner of one.txt" "$owner" "${HADOOP_USER_NAME:-$(id -un)}"; then ok; else show -ls "$B/dir"; fi
fi

step "ls -R"
if must -ls -R "$B"; then
  got="$(awk 'NF>=8 && $1 ~ /^[-d]/ { p=$NF; i=index(p,"/nimbus-fsshell."); p=substr(p,i); sub(/^\/[^\/]*/,"",p); print p }' "$OUT" | sort | tr '\n' ' ')"
  eq "ls -R paths" "$got" "/dir /dir/empty.bin /dir/mid.bin /dir/one.txt /dir/sub /dir/sub/big.bin /dir/sub/deep " && ok
fi

step "ls -d"
if must -ls -d "$B/dir"; then
  eq "ls -d" "$(awk 'NF>=8 {print substr($1,1,1), $NF}' "$OUT")" "d $B/dir" && ok
fi

step "cat (bytes)"
if must -cat "$B/dir/one.txt"; then same_bytes "$T/one.txt" "$OUT" && ok; fi

step "cat multi-block (bytes)"
if must -cat "$B/dir/sub/big.bin"; then same_bytes "$T/big.bin" "$OUT" && ok; fi

step "get (bytes of 0 B, small, >threshold, multi-block)"
r=0
for f in empty.bin one.txt mid.bin sub/big.bin; do
  rm -f "$T/got"
  if must -get "$B/dir/$f" "$T/got"; then same_bytes "$T/$(basename "$f")" "$T/got" || r=1; else r=1; fi
done
[[ $r == 0 ]] && ok

step "get onto an existing local file fails"
mustnot 'exists' -get "$B/dir/one.txt" "$T/got" && ok

step "mv file"
if must -mv "$B/dir/one.txt" "$B/dir/sub/moved.txt" && test_rc 1 -e "$B/dir/one.txt" && must -cat "$B/dir/sub/moved.txt"; then
  same_bytes "$T/one.txt" "$OUT" && ok
fi

step "mv directory"
if must -mv "$B/dir/sub/deep" "$B/deep2" && test_rc 1 -e "$B/dir/sub/deep" && test_rc 0 -d "$B/deep2"; then ok; fi

step "mv onto an existing file fails"
mustnot 'exists' -mv "$B/dir/mid.bin" "$B/dir/sub/moved.txt" && ok

step "chmod"
if must -chmod 640 "$B/dir/mid.bin"; then
  a="$(stat_of '%a' "$B/dir/mid.bin")"
  must -ls "$B/dir/mid.bin"; p="$(awk 'NF>=8 {print $1}' "$OUT")"
  eq "mode of mid.bin" "$a" 640 && eq "ls mode of mid.bin" "$p" "-rw-r-----" && ok
fi

step "chmod -R"
if must -chmod -R 750 "$B/dir/sub"; then
  eq "modes after chmod -R 750" "$(stat_of '%a' "$B/dir/sub") $(stat_of '%a' "$B/dir/sub/big.bin")" "750 750" && ok
fi

step "chown (superuser)"
if must -chown nimbususer:nimbusgroup "$B/dir/mid.bin"; then
  eq "owner:group" "$(stat_of '%u:%g' "$B/dir/mid.bin")" "nimbususer:nimbusgroup" && ok
fi

step "chown -R"
if must -chown -R nimbususer2 "$B/dir/sub"; then
  eq "owners after chown -R" "$(stat_of '%u' "$B/dir/sub") $(stat_of '%u' "$B/dir/sub/moved.txt")" "nimbususer2 nimbususer2" && ok
fi

step "du"
if must -du "$B/dir"; then
  got="$(awk 'NF>=3 { n=$NF; sub(/.*\//,"",n); print n, $1 }' "$OUT" | sort | tr '\n' ' ')"
  eq "du sizes" "$got" "empty.bin 0 mid.bin $SZ_MID sub $((SZ_BIG + SZ_ONE)) " && ok
fi

step "du -s"
if must -du -s "$B"; then
  eq "du -s total" "$(awk 'NF>=3 {print $1}' "$OUT")" "$((SZ_MID + SZ_BIG + SZ_ONE))" && ok
fi

step "count"
# base, dir, sub, deep2 | empty, mid, big, moved
if must -count "$B"; then
  eq "count (DIR_COUNT FILE_COUNT CONTENT_SIZE)" "$(awk '{print $1, $2, $3}' "$OUT")" "4 4 $((SZ_MID + SZ_BIG + SZ_ONE))" && ok
fi

step "setrep"
if must -setrep 2 "$B/dir/mid.bin"; then
  r1="$(stat_of '%r' "$B/dir/mid.bin")"
  must -setrep 1 "$B/dir/mid.bin"; r2="$(stat_of '%r' "$B/dir/mid.bin")"
  eq "replication after setrep 2, 1" "$r1 $r2" "2 1" && ok
fi

step "checksum (HDFS MD5-of-MD5-of-CRC32C, computed locally)"
r=0
for f in dir/empty.bin dir/mid.bin dir/sub/big.bin dir/sub/moved.txt; do
  src="$T/$(basename "$f")"; [[ $f == */moved.txt ]] && src="$T/one.txt"
  bs=134217728; [[ $f == */big.bin ]] && bs=$BS
  want="$(python3 "$HERE/hdfs_checksum.py" "$src" "$bs")"
  if must -checksum "$B/$f"; then
    got="$(awk -F'\t' '{print $2 "\t" $3}' "$OUT")"
    eq "checksum of ${f}" "$got" "$want" || r=1
  else r=1; fi
done
[[ $r == 0 ]] && ok

fi # FSSHELL_ONLY

# ACLs and extended attributes: output compared with tests/hadoop/expected/*.txt, which
# hold what HDFS 3.4.1's FsShell prints (captured from bench/hdfs's peer with FSSHELL_CAPTURE, not
# edited), with the work dir shown as B and owner and group as OWNER,
# GROUP. -getfattr -d prints a HashMap, so its lines are compared sorted.
# same_output NAME: $OUT, normalized, against expected/NAME.txt
same_output() { local got="$T/got.$1"
  sed -e "s|$B|B|g" -e 's|^# owner: .*|# owner: OWNER|' -e 's|^# group: .*|# group: GROUP|' "$OUT" > "$got"
  if [[ "$1" == *-sorted ]]; then { head -1 "$got"; tail -n +2 "$got" | LC_ALL=C sort; } > "$got.s"; mv "$got.s" "$got"; fi
  [[ -n "${FSSHELL_CAPTURE:-}" ]] && cp "$got" "$FSSHELL_CAPTURE/$1.txt"
  if ! cmp -s "$HERE/expected/$1.txt" "$got"; then fail "output differs from expected/$1.txt:"; diff "$HERE/expected/$1.txt" "$got" | sed 's/^/    /' | head -20; return 1; fi; return 0; }

step "getfacl of a path without an ACL"
if must -mkdir -p "$B/acl/d/sub" && must -chmod 750 "$B/acl/d" && must -getfacl "$B/acl/d"; then
  same_output getfacl-plain && ok
fi

step "setfacl -m (access and default entries), mask limits, ls shows +"
if must -setfacl -m user:bob:rwx,group:staff:r--,default:user:bob:r-x "$B/acl/d" && must -chmod g-w "$B/acl/d" \
   && must -getfacl "$B/acl/d" && same_output getfacl-modified && must -ls "$B/acl"; then
  line="$(grep -F "$B/acl/d" "$OUT" | head -1)"
  eq "ls mode column of acl/d" "${line%% *}" "drwxr-x---+" && ok
fi

step "setfacl -x, -k, -b"
if must -setfacl -x user:bob "$B/acl/d" && must -setfacl -k "$B/acl/d" && must -getfacl "$B/acl/d" \
   && same_output getfacl-removed && must -setfacl -b "$B/acl/d" && must -getfacl "$B/acl/d"; then
  same_output getfacl-plain && ok
fi

step "setfacl -R --set, getfacl -R"
if must -setfacl -R --set user::rwx,user:carol:r-x,group::---,other::---,default:user:carol:r-x "$B/acl/d" \
   && must -getfacl -R "$B/acl/d"; then
  same_output getfacl-R && ok
fi

step "default ACL inherited by a new file and a new directory (the client's umask 022)"
if must -touchz "$B/acl/d/newfile" && must -getfacl "$B/acl/d/newfile" && same_output getfacl-inherited-file \
   && must -mkdir "$B/acl/d/newdir" && must -getfacl "$B/acl/d/newdir" && same_output getfacl-inherited-dir; then ok; fi

step "setfacl errors: an ACL without its base entries, a spec that does not parse"
r=0
mustnot 'user, group and other entries are required' -setfacl --set user:bob:rwx "$B/acl/d" || r=1
mustnot 'Invalid permission' -setfacl -m user:bob:rwz "$B/acl/d" || r=1
[[ $r == 0 ]] && ok

step "setfattr (text, hex, no value), getfattr -d / -n -e hex / -e base64"
if must -touchz "$B/acl/f" && must -setfattr -n user.a -v hello "$B/acl/f" && must -setfattr -n user.b -v 0x0102 "$B/acl/f" \
   && must -setfattr -n user.empty "$B/acl/f" \
   && must -getfattr -d -e hex "$B/acl/f" && same_output getfattr-d-sorted \
   && must -getfattr -n user.a -e hex "$B/acl/f" && same_output getfattr-n-hex \
   && must -getfattr -n user.b -e base64 "$B/acl/f" && same_output getfattr-n-base64; then ok; fi

step "setfattr of a quoted text and a base64 value, getfattr -n -e text, getfattr -d (default encoding)"
if must -setfattr -n user.q -v '"quoted text"' "$B/acl/f" && must -setfattr -n user.s -v 0sAQID "$B/acl/f" \
   && must -getfattr -n user.q -e text "$B/acl/f" && same_output getfattr-n-text \
   && must -getfattr -n user.s -e hex "$B/acl/f" && same_output getfattr-n-hex-from-base64 \
   && must -getfattr -d "$B/acl/f" && same_output getfattr-d-default-sorted; then ok; fi

step "setfattr -x, getfattr of a missing attribute, a name without namespace"
r=0
must -setfattr -x user.a "$B/acl/f" || r=1
mustnot 'At least one of the attributes provided was not found' -getfattr -n user.a "$B/acl/f" || r=1
mustnot 'No matching attributes found' -setfattr -x user.a "$B/acl/f" || r=1
mustnot 'must be prefixed with user/trusted/security/system/raw' -setfattr -n bad -v 1 "$B/acl/f" || r=1
[[ $r == 0 ]] && ok

step "an unsupported op fails as an IOException (exit 1), not a fatal internal error"
fs -createSnapshot "$B/acl/d" s1
if [[ $RC != 1 ]] || grep -q 'Fatal internal error' "$ERR"; then fail "-createSnapshot: exit $RC, expected 1 without 'Fatal internal error'"; show -createSnapshot "$B/acl/d" s1; else ok; fi

if [[ "${FSSHELL_ONLY:-}" != acl ]]; then
step "errors: missing file, file as parent, rm of a directory without -r"
r=0
mustnot 'No such file or directory' -cat "$B/dir/no-such-file" || r=1
mustnot 'No such file or directory' -ls "$B/no-such-dir" || r=1
mustnot 'not a directory|exists|ParentNotDirectory' -mkdir -p "$B/dir/mid.bin/x" || r=1
mustnot 'is a directory' -rm "$B/dir/sub" || r=1
[[ $r == 0 ]] && ok

step "rm file, rm -r directory"
if must -rm "$B/dir/empty.bin" && test_rc 1 -e "$B/dir/empty.bin" \
   && must -rm -r "$B/dir/sub" && test_rc 1 -e "$B/dir/sub" && test_rc 1 -e "$B/dir/sub/big.bin" \
   && must -rm -r "$B" && test_rc 1 -e "$B"; then ok; fi

fi # FSSHELL_ONLY

echo "fsshell: $((STEPS - FAILS))/$STEPS checks passed against $URI in $((SECONDS - T0))s"
if [[ $FAILS -gt 0 ]]; then echo "fsshell: FAILED ($FAILS)"; exit 1; fi
echo "fsshell: OK"

#!/usr/bin/env bash
# Hadoop's own clients against a WebHDFS endpoint:
#   (a) fsshell.sh: a scripted `hadoop fs` session with every result checked
#   (b) Hadoop's FileSystem contract suites (AbstractContract*Test, FileSystemContractBaseTest), and
#       Hadoop's FSAclBaseTest/FSXAttrBaseTest bound to the endpoint (+ TestNimbusXAttrPermissions)
#
#   tests/hadoop/run.sh 127.0.0.1:9870 [extra mvn args, e.g. -Droot -Dtest=TestNimbusContractRename]
#
# Installs what it needs (Hadoop 3.4.1 jars resolved once into ~/.m2 by Maven), prints a summary and
# exits non-zero if anything failed. Environment: RUN_FSSHELL=0 / RUN_CONTRACT=0 skip a part.
# -Droot adds the root-directory suite, which DELETES EVERYTHING under / on the server.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EP="${1:?usage: $0 HOST:PORT [extra mvn args]}"; shift
EP="${EP#webhdfs://}"; EP="${EP#http://}"; EP="${EP%/}"
T0=$SECONDS

for c in java mvn python3 curl; do
  command -v "$c" >/dev/null || { echo "run.sh: $c not found" >&2; exit 2; }
done
code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://$EP/webhdfs/v1/?op=GETFILESTATUS&user.name=$(id -un)")"
if [[ "$code" != 200 ]]; then
  echo "run.sh: http://$EP/webhdfs/v1/?op=GETFILESTATUS answers HTTP $code, expected 200; is the server up?" >&2
  exit 2
fi

cd "$HERE"
echo "run.sh: resolving dependencies and compiling the tests (cached in ~/.m2 after the first run) ..."
t=$SECONDS
if ! mvn -q -B -Dstyle.color=never test-compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt; then
  echo "run.sh: maven build failed" >&2; exit 2
fi
T_BUILD=$((SECONDS - t))

rm -f target/fsshell.out target/contract-summary.txt
FS_RC=skipped; T_FS=0
if [[ "${RUN_FSSHELL:-1}" != 0 ]]; then
  echo; echo "=== (a) hadoop fs session (fsshell.sh) ==="
  t=$SECONDS
  ./fsshell.sh "$EP" | tee target/fsshell.out
  FS_RC=${PIPESTATUS[0]}
  T_FS=$((SECONDS - t))
fi

CT_RC=skipped; T_CT=0
if [[ "${RUN_CONTRACT:-1}" != 0 ]]; then
  echo; echo "=== (b) Hadoop FileSystem contract suites, ACL/xattr suites (mvn test) ==="
  t=$SECONDS
  rm -rf target/surefire-reports
  mvn -q -B -Dstyle.color=never test -Dnimbus.webhdfs="$EP" -Dsurefire.failIfNoSpecifiedTests=false "$@" > target/mvn-test.out 2>&1
  mvn_rc=$?
  T_CT=$((SECONDS - t))
  python3 summarize.py target/surefire-reports | tee target/contract-summary.txt
  CT_RC=${PIPESTATUS[0]}
  if [[ $mvn_rc != 0 && $CT_RC == 0 ]]; then
    CT_RC=$mvn_rc; echo "mvn test failed outside the tests:"; tail -30 target/mvn-test.out
  fi
  echo "(per-test output: tests/hadoop/target/surefire-reports/, maven log: tests/hadoop/target/mvn-test.out)"
fi

res() { case "$1" in 0) echo PASS;; skipped) echo skipped;; *) echo FAIL;; esac; }
echo
echo "=== summary: Hadoop 3.4.1 clients against webhdfs://$EP ==="
echo "build/deps            ${T_BUILD}s"
echo "(a) hadoop fs session $(res "$FS_RC")  ${T_FS}s  $(grep -o '[0-9]*/[0-9]* checks passed' target/fsshell.out 2>/dev/null)"
echo "(b) contract suites   $(res "$CT_RC")  ${T_CT}s  $(awk '$1=="TOTAL" {print $2" tests, "$3" passed, "$4" failed, "$5" skipped"}' target/contract-summary.txt 2>/dev/null)"
echo "total                 $((SECONDS - T0))s"
[[ "$FS_RC" == 0 || "$FS_RC" == skipped ]] && [[ "$CT_RC" == 0 || "$CT_RC" == skipped ]]

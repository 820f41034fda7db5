#!/usr/bin/env python3
"""Summarise surefire XML reports: one line per suite, then every failed and skipped test."""
import glob
import sys
import xml.etree.ElementTree as ET

d = sys.argv[1] if len(sys.argv) > 1 else "target/surefire-reports"
files = sorted(glob.glob(d + "/TEST-*.xml"))
if not files:
    print("no surefire reports in " + d)
    sys.exit(2)
tot = dict(tests=0, failures=0, errors=0, skipped=0)
bad, skipped = [], []
print("%-44s %6s %6s %6s %6s %8s" % ("suite", "tests", "pass", "fail", "skip", "time_s"))
for f in files:
    r = ET.parse(f).getroot()
    n = {k: int(r.get(k, 0)) for k in tot}
    for k in tot:
        tot[k] += n[k]
    name = r.get("name").split(".")[-1]
    passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    print("%-44s %6d %6d %6d %6d %8.1f" % (name, n["tests"], passed, n["failures"] + n["errors"],
                                           n["skipped"], float(r.get("time", 0))))
    for tc in r.findall("testcase"):
        tn = name + "." + tc.get("name")
        for kind in ("failure", "error"):
            e = tc.find(kind)
            if e is not None:
                bad.append("%s: %s" % (tn, (e.get("message") or e.get("type") or "").splitlines()[0][:300] if (e.get("message") or e.get("type")) else ""))
        s = tc.find("skipped")
        if s is not None:
            skipped.append("%s: %s" % (tn, (s.get("message") or "").splitlines()[0][:300] if s.get("message") else ""))
passed = tot["tests"] - tot["failures"] - tot["errors"] - tot["skipped"]
print("%-44s %6d %6d %6d %6d" % ("TOTAL", tot["tests"], passed, tot["failures"] + tot["errors"], tot["skipped"]))
if skipped:
    print("\nskipped:")
    for s in skipped:
        print("  " + s)
if bad:
    print("\nFAILED:")
    for b in bad:
        print("  " + b)
sys.exit(1 if bad else 0)

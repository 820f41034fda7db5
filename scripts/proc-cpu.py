#!/usr/bin/env python3
"""CPU seconds used so far by the processes of a benchmark, by role, from /proc.

    scripts/proc-cpu.py > before.json; ...; scripts/proc-cpu.py > after.json
    scripts/proc-cpu.py --delta before.json after.json OPS   # CPU µs per operation, by role

Roles: postgres (every process of the cluster), etcd, gateway (`nimbus serve`), instances
(`nimbus namenode`, the platform's children), driver (`nimbus bench`). Only processes alive at
the snapshot count: take both snapshots while the servers run.
"""
import json
import os
import sys


def role(cmd, exe):
    args = cmd.split()
    if "postgres" in exe or (args and "postgres" in os.path.basename(args[0])):
        return "postgres"
    if args and os.path.basename(args[0]) == "etcd":
        return "etcd"
    if "nimbus" in os.path.basename(exe) or (args and "nimbus" in os.path.basename(args[0])):
        sub = args[1] if len(args) > 1 else ""
        return {"serve": "gateway", "namenode": "instances", "bench": "driver"}.get(sub)
    return None


def snapshot():
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
            with open(f"/proc/{pid}/cmdline") as f:
                cmd = f.read().replace("\0", " ")
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                exe = ""
        except OSError:
            continue
        r = role(cmd, exe)
        if r is None:
            continue
        fields = st[st.rindex(")") + 2:].split()
        out[r] = out.get(r, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--delta":
        a, b = (json.load(open(p)) for p in sys.argv[2:4])
        ops = float(sys.argv[4])
        json.dump({r: round((b[r] - a.get(r, 0.0)) / ops * 1e6, 2) for r in b if ops > 0}, sys.stdout)
        return
    json.dump(snapshot(), sys.stdout)


if __name__ == "__main__":
    main()

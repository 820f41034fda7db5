#!/usr/bin/env python3
"""CPU seconds used so far by the processes of a benchmark, by role, from /proc.

    scripts/proc-cpu.py > before.json; ...; scripts/proc-cpu.py > after.json
    scripts/proc-cpu.py --delta before.json after.json OPS   # CPU µs per operation, by role

Roles: postgres (every process of the cluster), etcd, gateway (`nimbus serve`), instances
(`nimbus namenode`, the platform's children), driver (`nimbus bench`). A snapshot holds each
process's CPU by pid; the delta counts, for each process alive at the second snapshot, what it
used since the first (all of it if it started in between). A process that ended in between is
not counted: an instance the platform reclaimed during the run is missing from its figures.
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
        out[pid] = {"role": r, "cpu_s": (int(fields[11]) + int(fields[12])) / tick, "start": fields[19]}
    return out


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--delta":
        a, b = (json.load(open(p)) for p in sys.argv[2:4])
        ops = float(sys.argv[4])
        used = {}
        for pid, p in b.items():
            before = a.get(pid)
            same = before is not None and before["start"] == p["start"]  # not a reused pid
            used[p["role"]] = used.get(p["role"], 0.0) + p["cpu_s"] - (before["cpu_s"] if same else 0.0)
        json.dump({r: round(s / ops * 1e6, 2) for r, s in used.items() if ops > 0}, sys.stdout)
        return
    json.dump(snapshot(), sys.stdout)


if __name__ == "__main__":
    main()

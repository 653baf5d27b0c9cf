"""Runs a command (the tracer) and writes its own CPU time to a JSON file: utime + stime of
that process alone, not of its children, over its whole run, its end included. The process is
waited for without being reaped (WNOWAIT), so its /proc/PID/stat still holds the totals.
   python3 tracer_cpu.py OUT.json COMMAND...      (the command's stdout passes through)"""
import json
import os
import subprocess
import sys

out, cmd = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(cmd)
os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
with open(f"/proc/{p.pid}/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
tick = os.sysconf("SC_CLK_TCK")
utime, stime = int(fields[11]) / tick, int(fields[12]) / tick
rc = p.wait()
with open(out, "w") as f:
    json.dump({"utime_s": utime, "stime_s": stime, "cpu_s": utime + stime, "rc": rc}, f)
sys.exit(rc)

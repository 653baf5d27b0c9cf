"""Runs a command (the tracer) and writes its own CPU time to a JSON file: utime + stime of
that process alone, not of its children, over its whole run, its end included. The process is
waited for without being reaped (WNOWAIT), so its /proc/PID/stat still holds the totals.
Also how much of it came after the traced command (the tracer's child) exited: the session's
end (`end_cpu_s`, polled every 20 ms, so within a tick or two), and its peak RSS (`hwm_kib`:
VmHWM, the last value read before it exited, polled as often; the session's end is its top).
   python3 tracer_cpu.py OUT.json COMMAND...      (the command's stdout passes through)"""
import json
import os
import subprocess
import sys
import threading
import time

out, cmd = sys.argv[1], sys.argv[2:]
tick = os.sysconf("SC_CLK_TCK")


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / tick, int(fields[12]) / tick


def hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def has_children(pid):
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                if f.read().strip():
                    return True
    except OSError:
        pass
    return False


p = subprocess.Popen(cmd)
at_child_exit = []
hwm = [None]
done = threading.Event()


def watch():
    seen = False
    while not done.is_set():
        try:
            hwm[0] = hwm_kib(p.pid) or hwm[0]
        except OSError:
            pass
        if not at_child_exit:
            kids = has_children(p.pid)
            seen = seen or kids
            if seen and not kids:
                try:
                    at_child_exit.append(sum(cpu_of(p.pid)))
                except OSError:
                    pass
        time.sleep(0.02)


w = threading.Thread(target=watch, daemon=True)
w.start()
os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
done.set()
utime, stime = cpu_of(p.pid)
rc = p.wait()
w.join()
end = utime + stime - at_child_exit[0] if at_child_exit else None
with open(out, "w") as f:
    json.dump({"utime_s": utime, "stime_s": stime, "cpu_s": utime + stime, "end_cpu_s": end,
               "hwm_kib": hwm[0], "rc": rc}, f)
sys.exit(rc)

"""The summary of bench/gpu_check.sh's runs (its work folder T, the ingero binary I): ns per
launch against the floor, ResNet-18 step times against untraced and the minimal counting pair,
what each trace kept per step of PyTorch's window, and the tracer's CPU a call.
   python3 gpu_summary.py T INGERO"""
import glob, json, os, statistics, subprocess, sys
T, ing = sys.argv[1], sys.argv[2]
def q(db, sql):
    r = subprocess.run([ing, "query", "--db", db, "--json", sql], capture_output=True, text=True)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return [{"error": (r.stderr or r.stdout)[-300:]}]
def cpu(tag):
    try:
        return json.load(open(f"{T}/{tag}.cpu"))
    except (OSError, ValueError):
        return {}
def calls(tag):
    r = q(f"{T}/{tag}.db", "SELECT count(*) AS n FROM calls")
    return r[0].get("n", 0) if r else 0

print("== summary: per launch, empty kernel (median of 3, ns)")
m = {}
for line in open(f"{T}/micro.txt") if os.path.exists(f"{T}/micro.txt") else []:
    w = line.split()
    if len(w) == 2:
        m.setdefault(w[0], []).append(float(w[1]))
med = {k: statistics.median(v) for k, v in m.items()}
base = med.get("untraced", 0)
for k, v in med.items():
    print(f"  {k:10s} {v:8.1f}  (+{v - base:.1f})  rounds {m[k]}")
floor = med.get("floor", base) - base
for k in ("pair", "nostack", "default"):
    if k in med and floor > 0:
        print(f"  {k}: added / the floor's = {(med[k] - base) / floor:.2f}x")
for k in range(1, 4):
    for mode in ("nostack", "default"):
        tag = f"micro-{mode}-{k}"
        ops = q(f"{T}/{tag}.db", "SELECT op, count(*) AS n FROM calls GROUP BY op ORDER BY n DESC")
        c = cpu(tag)
        n = sum(o.get("n", 0) for o in ops)
        kept = ", ".join(str(o.get("op")) + " " + str(o.get("n")) for o in ops[:5])
        print(f"  {tag}: {kept}; tracer CPU {c.get('cpu_s', 0):.2f} s = {1e6 * c.get('cpu_s', 0) / max(n, 1):.2f} us a call"
              f" (end {c.get('end_cpu_s') or 0:.2f} s), peak {c.get('hwm_kib') or 0} KiB")

print("== summary: ResNet-18 step (median ms of each run's window)")
runs = {}
for line in open(f"{T}/steps.txt") if os.path.exists(f"{T}/steps.txt") else []:
    mode, js = line.split(" ", 1)
    r = json.loads(js)
    runs[r["tag"]] = (mode, r)
for wl in ("LB", "GB"):
    per = {}
    for tag, (mode, r) in sorted(runs.items()):
        if tag.startswith(wl + "-"):
            per.setdefault(mode, []).append(r["median_ms"])
    if not per.get("plain"):
        continue
    b = statistics.median(per["plain"])
    for mode, v in per.items():
        mm = statistics.median(v)
        print(f"  {wl} {mode:8s} {mm:7.2f} ms  ({100 * (mm - b) / b:+.1f}%)  runs {[round(x, 2) for x in v]}")
    if per.get("pair"):
        pb = statistics.median(per["pair"]) - b
        for mode in ("nostack", "default", "nonames"):
            if per.get(mode) and pb > 0:
                print(f"  {wl} {mode}: added / the pair's = {(statistics.median(per[mode]) - b) / pb:.2f}x")
print("== summary: what each trace kept in PyTorch's window, per step")
for tag, (mode, r) in sorted(runs.items()):
    if mode not in ("nostack", "default", "nonames"):
        continue
    db = f"{T}/{tag}.db"
    ops = q(db, f"SELECT op, count(*) AS n FROM calls WHERE pid = {r['pid']} AND ts_ns BETWEEN "
                f"{r['t0']} AND {r['t1']} GROUP BY op ORDER BY n DESC")
    s = r["steps_in_window"]
    c = cpu(tag)
    n = calls(tag)
    kept = ", ".join("%s %.2f" % (o.get("op"), o.get("n", 0) / s) for o in ops[:8])
    print(f"  {tag}: {kept}")
    print(f"    {n} calls stored; tracer CPU {c.get('cpu_s', 0):.2f} s = "
          f"{1e6 * c.get('cpu_s', 0) / max(n, 1):.2f} us a call (end {c.get('end_cpu_s') or 0:.2f} s),"
          f" peak {c.get('hwm_kib') or 0} KiB, file {os.path.getsize(db) if os.path.exists(db) else 0} B")
    # One launch in --launch-timing (32) per thread timed, counted as launches are made, before
    # the runtime's launch probes go (2,000 launches) as after (LaunchTiming.*).
    lt = q(db, f"SELECT count(*) AS n, sum(status <> 'untimed') AS timed FROM calls "
               f"WHERE pid = {r['pid']} AND kind = 'launch'")
    if lt and lt[0].get("n"):
        n_l, t_l = lt[0]["n"], lt[0].get("timed") or 0
        print(f"    launches timed: {t_l} of {n_l} (1 in {n_l / max(t_l, 1):.1f}; want ~32)")
    if tag.endswith("-1"):
        st = q(db, "SELECT bpf_stats FROM sessions")
        st = json.loads(st[0].get("bpf_stats") or "{}") if st else {}
        print("    bpf_stats:", {k: v for k, v in st.items() if v and any(
            w in k for w in ("detach", "drop", "fold", "renamed", "nested", "timed", "kernel",
                             "refused", "lost", "unpaired", "overflow", "again", "lookup"))})

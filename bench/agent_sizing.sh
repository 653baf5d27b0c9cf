#!/usr/bin/env bash
# The agent's own resources per traced call: CPU, peak RSS, the kernel memory of its BPF maps
# and trace-file bytes, for the sizing table of docs/deploy.md. Needs root.
#   bench/agent_sizing.sh [BUILD_DIR] [SECONDS] [RATE...]
#   TRACE_FLAGS="--prometheus 127.0.0.1:9477" bench/agent_sizing.sh ...   (extra trace flags)
#
# For each RATE (calls/s), and once idle: call_loop (bench/) waits paced at RATE on the
# installed libcudart's cudaFree (LIB; without a GPU it fails at once, through the library); `ingero trace --pid` attaches to it (stacks on, the
# default), the loop runs SECONDS, then the tracer is stopped with SIGINT. The tracer alone is
# measured (the workload is not its child), from /proc/PID: user+system CPU over the window in
# which the loop ran (steady state), the peak RSS (VmHWM) before it stops, and, from
# /usr/bin/time, the CPU its shutdown took (drain, indexes, session summary). The memory of its
# BPF maps is the sum of `memlock` over the maps it holds open (/proc/PID/fdinfo): kernel memory,
# charged to the agent's memory cgroup (Linux 5.11+), not in its RSS. The idle run (the
# same tracer, a workload that makes no call) is subtracted from the CPU, so the figure is the
# cost of the calls. Bytes are the trace file (+ WAL) after the tracer exits, per stored call.
set -euo pipefail
B=${1:-build}
SECS=${2:-30}
shift $(($# > 2 ? 2 : $#)) || true
RATES=("$@")
((${#RATES[@]})) || RATES=(5000 20000)
ING=$B/app/ingero
LIB=${LIB:-/usr/local/cuda/lib64/libcudart.so.13}
[[ -e $LIB ]] || { echo "agent_sizing: $LIB is missing (set LIB)" >&2; exit 2; }
[[ $EUID -eq 0 ]] || { echo "agent_sizing: needs root" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

cpu_s() {  # user+system seconds of a process so far
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}

bpf_maps_kib() {  # the memlock of the BPF maps process $1 holds open, each map once
  grep -H -E '^(map_id|memlock):' /proc/"$1"/fdinfo/* 2>/dev/null | awk -F'[: \t]+' '
    { f = $1; if ($2 == "map_id") id[f] = $3; else mem[f] = $3 }
    END { for (f in id) if (!(id[f] in seen)) { seen[id[f]] = 1; t += mem[f] } print int(t / 1024) }'
}

# run RATE -> "calls window_cpu_s hwm_kib db_bytes wall_s total_cpu_s bpf_kib"
run() {
  local rate=$1 n db="$out/r$1.db" pid tpid ipid c0 c1 hwm bpf t0 t1
  n=$((rate * SECS))
  ((n > 0)) || n=1
  coproc LOOP { CALL_LOOP_WAIT=1 exec "$B/bench/call_loop" "$LIB" cudaFree "$n" "$rate"; }
  read -r _ pid <&"${LOOP[0]}"
  /usr/bin/time -f "%U %S" -o "$out/time$rate" "$ING" trace -q --pid "$pid" --db "$db" ${TRACE_FLAGS:-} \
    >"$out/trace$rate.log" 2>&1 &
  tpid=$!
  for _ in $(seq 100); do ipid=$(pgrep -P "$tpid" -x ingero) && break; sleep 0.1; done
  # Attached once the trace file exists; then let start-up work settle.
  for _ in $(seq 100); do [[ -s $db ]] && break; sleep 0.1; done
  sleep 3
  t0=$(date +%s.%N)
  c0=$(cpu_s "$ipid")
  if ((rate == 0)); then sleep "$SECS"; fi
  echo go >&"${LOOP[1]}"
  wait "$LOOP_PID" 2>/dev/null || true
  sleep 0.5  # the last 100 ms poll
  c1=$(cpu_s "$ipid")
  t1=$(date +%s.%N)
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$ipid/status")
  bpf=$(bpf_maps_kib "$ipid")
  kill -INT "$ipid"
  wait "$tpid" || true
  local calls u s
  calls=$("$ING" query --db "$db" --json "SELECT count(*) AS n FROM calls" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["n"])')
  read -r u s <"$out/time$rate"
  echo "$calls $(python3 -c "print($c1-$c0)") $hwm $(du -cb "$db"* | tail -1 | cut -f1) $(python3 -c "print($t1-$t0)") $(python3 -c "print($u+$s)") $bpf"
}

echo "idle: tracer attached, no calls, ${SECS}s"
read -r _ idle_cpu idle_rss idle_bytes idle_wall idle_total idle_bpf < <(run 0)
echo "  cpu ${idle_cpu}s over ${idle_wall}s  peak RSS ${idle_rss} KiB  BPF maps ${idle_bpf} KiB  file ${idle_bytes} B  (whole run ${idle_total}s CPU)"
for rate in "${RATES[@]}"; do
  read -r calls cpu rss bytes wall total bpf < <(run "$rate")
  python3 - "$rate" "$calls" "$cpu" "$rss" "$bytes" "$wall" "$total" "$idle_cpu" "$idle_wall" \
    "$idle_rss" "$idle_bytes" "$idle_total" "$bpf" <<'PY'
import sys
rate, calls, cpu, rss, b, wall, total, icpu, iwall, irss, ib, itotal, bpf = map(float, sys.argv[1:])
achieved = calls / wall
per_call_us = (cpu - icpu * wall / iwall) / calls * 1e6
print(f"rate {rate:.0f}/s asked, {achieved:.0f}/s achieved over {wall:.1f}s: {calls:.0f} calls stored")
print(f"  agent CPU while tracing {cpu:.2f}s ({per_call_us:.2f} us per call over idle)"
      f" -> {per_call_us * 1e5 / 1e6 * 100:.0f}% of one core per 100k calls/s")
shutdown = total - cpu - (itotal - icpu)
print(f"  whole run {total:.2f}s CPU; shutdown and start-up beyond idle: {shutdown:.2f}s"
      f" ({shutdown / calls * 1e6:.2f} us per call stored)")
print(f"  peak RSS {rss/1024:.0f} MiB (idle {irss/1024:.0f} MiB); BPF maps {bpf/1024:.0f} MiB")
bpc = (b - ib) / calls
print(f"  trace file {b/1e6:.1f} MB: {bpc:.0f} bytes per call"
      f" -> {bpc*1e3*3600/1e9:.2f} GB/hour per 1k calls/s")
PY
done

#!/usr/bin/env bash
# The device side channel's cost at 10 Hz, as a share of one core (target <= 0.1%): the poll
# thread over the stand-in libnvidia-ml.so.1 (every optional function), and the event loop's
# cost of writing the rows to a trace file and the Prometheus registry. Two hosts: one GPU with
# one process; eight GPUs with four processes each plus an amdgpu card with a process's DRM
# client (a fake sysfs tree and fdinfo file). The figures are CPU time over wall time (a rate,
# not a timed test). What the real driver spends inside NVML is not in them (no GPU here).
#   bench/device_poll_cost.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
B=${1:-build}
SECS=${2:-30}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
nvml_script() {  # DEVICES PROCS
  for ((d = 0; d < $1; d++)); do
    echo "device uuid=GPU-bench-$d name=Bench gpu=40 mem=20 used=1000000 total=80000000000 sm_clock=1980 mem_clock=2619 power=300000 temp=50 reasons=0 ecc_unc=0 ecc_cor=0"
    for ((p = 1; p <= $2; p++)); do echo "proc device=$d pid=$((1000 + d * 10 + p)) sm=10 mem=5 used=123456"; done
  done
}
amd_tree() {  # ROOT: one card, and this shell's fdinfo with one DRM client among 10 fds
  local sys=$1/sys proc=$1/proc d=$1/sys/class/drm/card0/device
  mkdir -p $d/hwmon/hwmon0 $proc/$$/fdinfo
  echo 37 > $d/gpu_busy_percent; echo 12 > $d/mem_busy_percent
  echo 1048576 > $d/mem_info_vram_used; echo 17179869184 > $d/mem_info_vram_total
  printf 'DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n' > $d/uevent
  echo 123456000 > $d/hwmon/hwmon0/power1_average; echo 51000 > $d/hwmon/hwmon0/temp1_input
  for fd in 0 1 2 3 4 5 6 7 8 9; do printf 'pos:\t0\nflags:\t02\n' > $proc/$$/fdinfo/$fd; done
  printf 'drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t9\ndrm-engine-gfx:\t1000 ns\ndrm-engine-compute:\t5000 ns\ndrm-memory-vram:\t2048 KiB\n' > $proc/$$/fdinfo/10
}
run() {  # NAME DEVICES PROCS AMD(0/1) [SAMPLER_EXE: NVML in its own process, as the tracer runs it]
  local dir=$out/run-$2-$3-$4-${5:+own}
  mkdir -p $dir/sys $dir/proc
  nvml_script $2 $3 > $dir/script
  [[ $4 == 1 ]] && amd_tree $dir
  FAKE_NVML_SCRIPT=$dir/script INGERO_BENCH_SAMPLER_EXE=${5:-} $B/bench/device_poll_bench "$B/tests/fake/nvml-full/libnvidia-ml.so.1" \
    $dir/sys $dir/proc "$SECS" 100 $dir/bench.db $$ 2>/dev/null > $dir/r.json
  python3 - "$1" $dir/r.json <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
print(f"{sys.argv[1]:44} poll {r['poll_core_share_pct']:.4f}% of a core at {r['polls_per_s']:.1f} Hz "
      f"({r['poll_cpu_us_per_poll']:.1f} us a poll, {r['process_cpu_us_per_poll']:.1f} of it NVML's process: "
      f"{r['process_start_cpu_ms']:.1f} ms to start, then {r['process_steady_cpu_us_per_poll']:.1f} us a poll); recording {r['record_core_share_pct']:.4f}% "
      f"({r['record_us_per_row']:.2f} us a row, {r['samples'] / max(1, r['polls']):.0f} rows a poll)")
PY
}
echo "target: poll thread (and NVML's own process) <= 0.1% of a core at 10 Hz"
run "1 GPU, 1 process, in process" 1 1 0
run "1 GPU, 1 process, NVML's own process" 1 1 0 "$B/app/ingero"
run "8 GPUs x 4 processes + amdgpu, in process" 8 4 1
run "8 GPUs x 4 processes + amdgpu, NVML's own" 8 4 1 "$B/app/ingero"

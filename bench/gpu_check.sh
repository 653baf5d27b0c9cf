#!/bin/bash
# Issue 43's figures on a GPU machine (the `device` tool), in one call of about 9 minutes:
#   - ns per empty-kernel launch on the real driver: untraced, the floor (one entry-only probe on
#     libcuda's cuLaunchKernel), the minimal counting pair (uprobe + uretprobe on cudaLaunchKernel
#     and cuLaunchKernel: 4 traps), ingero --no-stack and default; the tracer's CPU a call;
#   - ResNet-18 step time (launch-bound 64 px and GPU-bound 224 px): untraced, under the pair,
#     ingero --no-stack, default and (launch-bound) --no-kernel-names, interleaved rounds; the launches each trace kept per step of
#     PyTorch's window, beside PyTorch's own count (fixtures/h100/README.md: 264 cudaLaunchKernel
#     through libcudart, 11 cuLaunchKernel and 64 cuLaunchKernelEx direct, a step);
#   - the same launches under the uprobe_multi pair (kernels before 6.12), launches timed in
#     windows: ns per launch and the traps' counters;
#   - fresh traces of the planted faults, with explain's text.
# Here (after a build):   bench/gpu_check.sh pack [BUILD_DIR]
# There:                  device run, carry [".gpu-bundle"], timeout_s 560,
#                         command: BUDGET_S=480 bash .gpu-bundle/gpu_check.sh
# Results: $OUT/gpu_check.txt, and traces as $OUT/*.db.xz. Runs that would pass BUDGET_S are left
# out (said so); on a machine still warm, `python3 .gpu-bundle/gpu_summary.py /tmp/gc
# .gpu-bundle/ingero` gives the summary again. Figures of 2026-11-30: docs/performance.md,
# "On an H200".
set -u
if [[ ${1:-} == pack ]]; then
  B=${2:-build}
  HERE=$(cd "$(dirname "$0")" && pwd)
  "$HERE/../../shared/gpu/bundle.sh" "$B" > /dev/null || exit 1
  cp "$B/bench/min_probe" "$HERE"/{gpu_check.sh,gpu_summary.py,tracer_cpu.py} .gpu-bundle/
  strip .gpu-bundle/min_probe
  patchelf --force-rpath --set-rpath '$ORIGIN/lib' .gpu-bundle/min_probe
  du -sh .gpu-bundle
  exit 0
fi

cd "$(dirname "$0")" || exit 1
START=$(date +%s)
export PYTHONUNBUFFERED=1
I=$PWD/ingero
O=${OUT:-/tmp/gpu_out}
T=/tmp/gc
mkdir -p "$O" "$T"
exec > >(tee -a "$O/gpu_check.txt") 2>&1
[ -e /sys/kernel/tracing/events ] || mount -t tracefs tracefs /sys/kernel/tracing
date -u
uname -r
nproc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 "$I" check 2>&1 | tail -32
nvcc -O2 -cudart shared micro.cu -o $T/micro || exit 1
python3 - > $T/libs <<'PY'
import torch
torch.zeros(1, device="cuda")
seen = {}
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    for lib in ("libcudart.so", "libcuda.so"):
        if "/" + lib in path:
            seen.setdefault(lib, path)
print(seen.get("libcudart.so", "-"), seen.get("libcuda.so", "-"), torch.__version__)
PY
read -r RT DRV TV < $T/libs
MRT=$(ldd $T/micro | awk '/libcudart.so/{print $3}')
echo "torch $TV; its libcudart $RT; libcuda $DRV; micro's libcudart $MRT"

HOLD_FDS=()
HOLD_PIDS=()
hold() {  # LIBRARY SYMBOL MODE: min_probe attached until release
  local f=$T/hp.$RANDOM line fd
  mkfifo "$f.in" "$f.out"
  ./min_probe "$@" < "$f.in" > "$f.out" 2>> $T/min_probe.err &
  HOLD_PIDS+=($!)
  exec {fd}> "$f.in"
  HOLD_FDS+=("$fd")
  read -r line < "$f.out"
  [[ $line == attached ]] || echo "!! min_probe $* did not attach: $(tail -1 $T/min_probe.err)"
}
release() {
  local fd
  for fd in "${HOLD_FDS[@]}"; do exec {fd}>&-; done
  wait "${HOLD_PIDS[@]}" 2> /dev/null
  HOLD_FDS=()
  HOLD_PIDS=()
}
pair() { hold "$1" cudaLaunchKernel pair; hold "$DRV" cuLaunchKernel pair; }
traced() {  # TAG MODE COMMAND...: ingero (MODE nostack|default) around COMMAND, CPU in TAG.cpu
  local tag=$1 mode=$2 flags=()
  shift 2
  [[ $mode == nostack ]] && flags=(--no-stack)
  [[ $mode == nonames ]] && flags=(--no-kernel-names)
  timeout 150 python3 tracer_cpu.py $T/$tag.cpu "$I" trace "${flags[@]}" --db $T/$tag.db -- "$@"
}
micro_ns() { awk '/RESULT/{print $3}'; }

echo "== per launch, empty kernel, 200,000 launches (ns), 3 interleaved rounds"
for k in 1 2 3; do
  echo "untraced $($T/micro 200000 | micro_ns)" >> $T/micro.txt
  hold "$DRV" cuLaunchKernel session-skip
  echo "floor $($T/micro 200000 | micro_ns)" >> $T/micro.txt
  release
  pair "$MRT"
  echo "pair $($T/micro 200000 | micro_ns)" >> $T/micro.txt
  release
  for m in nostack default; do
    echo "$m $(traced micro-$m-$k $m $T/micro 200000 2> $T/micro-$m-$k.err | micro_ns)" >> $T/micro.txt
  done
done
cat $T/micro.txt
grep -h -i -E 'detach|drop|lost|stopped|GPU busy' $T/micro-default-1.err

# Kernels before 6.12 (no uprobe sessions): launches timed in windows (probe/launch_windows.h),
# scaled to 100 ms in every 3.2 s so that a run of seconds holds several.
echo "== per launch under the uprobe_multi pair, windows of 100 ms in every 3.2 s, 2,000,000 launches"
echo "untraced $($T/micro 2000000 | micro_ns)"
echo "multi $(INGERO_CALL_ATTACH=multi INGERO_LAUNCH_WINDOW_MS=100 traced micro-multi default \
  $T/micro 2000000 2> $T/micro-multi.err | micro_ns)"
"$I" query --db $T/micro-multi.db --json "SELECT bpf_stats FROM sessions" | python3 -c '
import json, sys
s = json.loads(json.load(sys.stdin)[0]["bpf_stats"])
print({k: s.get(k) for k in ("calls", "untimed", "nested", "untimed_returns", "launch_windows_opened",
                             "runtimes_detached", "ringbuf_drops")})'

train() {  # TAG MODE ARGS...
  local tag=$1 mode=$2
  shift 2
  case $mode in
    plain) timeout 150 python3 train.py "$@" --tag "$tag" > $T/$tag.out 2>&1 ;;
    pair)
      pair "$RT"
      timeout 150 python3 train.py "$@" --tag "$tag" > $T/$tag.out 2>&1
      release
      ;;
    *) traced "$tag" "$mode" python3 train.py "$@" --tag "$tag" > $T/$tag.out 2>&1 ;;
  esac
  grep -h '^RESULT' $T/$tag.out | sed "s/^RESULT /$mode /" >> $T/steps.txt
  grep -h -i -E 'detach|drop|lost|stopped|GPU busy|kernel names|Traceback|Error' $T/$tag.out | sed "s/^/  $tag: /"
}
LB="--steps 300 --warm 50 --res 64 --batch 128"
GB="--steps 120 --warm 20 --res 224 --batch 128"
# Each traced ResNet run is a ~25 s session (PyTorch's start-up most of it): what does not fit
# in BUDGET_S (the device call's limit less the summary's minute) is left out, said so.
fits() { (($(date +%s) - START + ${1:-30} < ${BUDGET_S:-480})) || { echo "!! out of time: $2 left out"; false; }; }
echo "== ResNet-18 launch-bound, 3 interleaved rounds"
for k in 1 2 3; do for m in plain pair nostack default nonames; do
  fits 30 "LB-$m-$k" && train LB-$m-$k $m $LB
done; done

echo "== planted faults, default"
rec() {  # NAME COMMAND...
  local n=$1
  shift
  traced "$n" default "$@" > $T/$n.out 2>&1
  grep -h -E 'RESULT|drop|lost|stopped' $T/$n.out
}
fits 40 starve && rec starve python3 faults.py starve 40
fits 40 emptycache && rec emptycache python3 faults.py emptycache 60

echo "== ResNet-18 GPU-bound, 2 interleaved rounds"
for k in 1 2; do for m in plain nostack default; do
  fits 30 "GB-$m-$k" && train GB-$m-$k $m $GB
done; done

python3 gpu_summary.py "$T" "$I"

for n in LB-default-1 GB-default-1 starve emptycache; do
  [ -f $T/$n.db ] || continue
  echo "== explain $n"
  timeout 30 "$I" explain --db $T/$n.db 2>&1 | head -60
done
cd $T && for n in LB-default-1 GB-default-1 starve emptycache micro-default-1; do
  [ -f $n.db ] && timeout 30 xz -1 -T16 -c $n.db > "$O/$n.db.xz"
done
ls -la "$O"
echo "== done $(date -u)"

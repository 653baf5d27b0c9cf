# Sourced by the benches that compare a probe with the floor (launch_cost.sh,
# run_benchmarks.sh): every CPU but the last kept busy by a spinner at SCHED_IDLE, which any
# other task preempts, while the measured loop runs pinned to the last CPU and the tracer on
# the others. On a host whose CPUs share a core or a power budget (this VM's two vCPUs: the
# floor's trap costs ~18% more while the other vCPU is busy), the tracer's own CPU on the
# next CPU slows the traced thread's every trap; with the other CPUs busy in every
# configuration, floor and tracer alike, the ratio is what the probe itself adds.
#   busy_cpus_start; ... "${BUSY_PIN[@]}" LOOP ...; "${BUSY_OTHERS[@]}" TRACER ...; busy_cpus_stop
BUSY_LAST=$(($(nproc) - 1))
BUSY_PIN=(taskset -c "$BUSY_LAST")
BUSY_OTHERS=(taskset -c "0-$((BUSY_LAST > 0 ? BUSY_LAST - 1 : 0))")
busy_spinners=()
busy_cpus_start() {
  local c
  for c in $(seq 0 $((BUSY_LAST - 1))); do
    chrt -i 0 taskset -c "$c" sh -c 'while :; do :; done' &
    busy_spinners+=($!)
  done
  sleep 0.1
}
busy_cpus_stop() {
  [[ ${#busy_spinners[@]} -eq 0 ]] && return 0
  kill "${busy_spinners[@]}" 2>/dev/null || true
  wait "${busy_spinners[@]}" 2>/dev/null || true
  busy_spinners=()
}

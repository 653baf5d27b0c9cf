# Sourced by the benches of the stand-in runtime -> driver pair (launch_cost.sh,
# bpf_prog_cost.sh), with B (the build directory) and NAME (for messages) set: the tracer, the
# pair's libraries and the launch count. Exits 2 where the pair is not built.
ING=$B/app/ingero
[[ -d $B/bench/pair ]] || { echo "$NAME: build the pair first (target launch_loop)" >&2; exit 2; }
PAIR=$(cd "$B/bench/pair" && pwd)
LIB=$PAIR/lib64/libcudart.so.13
DRV=$PAIR/lib64/libcuda.so.1
[[ -e $LIB && -e $DRV ]] || { echo "$NAME: build the pair first (target launch_loop)" >&2; exit 2; }
N=${LAUNCHES:-300000}

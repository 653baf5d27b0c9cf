# Sourced by the benches of the stand-in runtime -> driver pair (launch_cost.sh,
# bpf_prog_cost.sh, lookup_cost.sh), with B (the build directory) and NAME (for messages) set: the
# tracer, the pair's libraries, the launch count, and ns (a loop's JSON line on stdin -> its ns
# per call). Exits 2 where the pair is not built.
ING=$B/app/ingero
[[ -d $B/bench/pair ]] || { echo "$NAME: build the pair first (target launch_loop)" >&2; exit 2; }
PAIR=$(cd "$B/bench/pair" && pwd)
LIB=$PAIR/lib64/libcudart.so.13
DRV=$PAIR/lib64/libcuda.so.1
[[ -e $LIB && -e $DRV ]] || { echo "$NAME: build the pair first (target launch_loop)" >&2; exit 2; }
N=${LAUNCHES:-300000}
ns() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["ns_per_call"])'; }

"""A CPU-only proxy of a launch-bound PyTorch training step, on the real libcudart.

Each of THREADS threads runs STEPS steps. A step is what the H100 ResNet-18 (64 px) trace
shows per step: 330 cudaLaunchKernel, 4 cudaMemcpyAsync and one cudaStreamSynchronize, each
launch preceded by ~20 us of Python work, all called ~25 Python frames deep (the depth of a
torch.nn forward). Without a GPU the runtime returns an error at once, but every call enters
the library, so the probes fire as they would in training.

Prints one JSON line: the step time (the wall time from the first steady step's start to
the last step's end, divided by the steady steps per thread: the threads share the GIL, so
a per-thread median would depend on how the GIL happens to be handed over), the median and
p90 of single steps, a stepping thread's own CPU a step (cpu_ms: user and system, where a
probe's traps and programs are charged), and the calls made per function, for comparison
with what a tracer stored. The first WARMUP steps of each thread are dropped.

GIL: how the threads share the interpreter, which decides how often they switch.
  held      (default) as PyTorch calls the runtime: with the GIL held (ctypes.PyDLL), so the
            stepping threads hand it over at Python's switch interval; beside them a native
            thread (STEP_PROXY_SLEEPER: build/bench/libproxy_sleeper.so) that each stepping
            thread wakes PINS times a step, as a pin-memory thread wakes for its batches. The
            H100 ResNet-18 trace (fixtures/h100/resnet-clean) has 0.058 context switches a
            call: 11 a step on its main thread, 15 on its pin-memory thread.
  released  ctypes' default (ctypes.CDLL): every call releases the GIL and the other thread
            takes it, about a context switch a call: a stress case for the tracer's host
            side (~8x the switches a call of the real trace), not the shape of training.
   python3 step_proxy.py LIBCUDART [STEPS [THREADS [WORK_US [GIL]]]]"""
import ctypes
import json
import os
import statistics
import sys
import threading
import time

LAUNCHES, COPIES, DEPTH, WARMUP, PINS = 330, 4, 25, 5, 12


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def calibrate(work_us):
    """Iterations of the Python work loop that take work_us microseconds, timed the way the
    step calls it: many short runs (long runs would reach big integers and cost more)."""
    n, reps = 100, 2000
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        python_work(n)
    per_iter = (time.perf_counter_ns() - t0) / (reps * n)
    return max(1, int(work_us * 1000 / per_iter))


def python_work(n):
    acc = 0
    for i in range(n):
        acc += i * i & 7
    return acc


class Step:
    def __init__(self, lib, work_iters, sleeper):
        self.launch = lib.cudaLaunchKernel
        self.launch.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t,
                                ctypes.c_void_p]
        self.copy = lib.cudaMemcpyAsync
        self.copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                              ctypes.c_void_p]
        self.sync = lib.cudaStreamSynchronize
        self.sync.argtypes = [ctypes.c_void_p]
        self.grid, self.block = Dim3(64, 1, 1), Dim3(256, 1, 1)
        self.buf = ctypes.create_string_buffer(4096)
        self.work_iters = work_iters
        self.wake = sleeper.proxy_sleeper_post if sleeper else None

    def run(self):
        every = LAUNCHES // PINS
        for i in range(LAUNCHES):
            python_work(self.work_iters)
            self.launch(0x1000, self.grid, self.block, None, 0, None)
            if self.wake and i % every == every - 1:
                self.wake()
        for _ in range(COPIES):
            self.copy(self.buf, self.buf, 4096, 1, None)
        self.sync(None)


def nest(depth, fn):
    """Calls fn() depth Python frames below this one."""
    if depth <= 0:
        return fn()
    return nest(depth - 1, fn)


def main():
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    work_us = float(sys.argv[4]) if len(sys.argv) > 4 else 20.0
    gil = sys.argv[5] if len(sys.argv) > 5 else "held"
    if gil not in ("held", "released"):
        sys.exit(f"step_proxy: GIL is held or released, not {gil!r}")
    sleeper = None
    if gil == "held":
        path = os.environ.get("STEP_PROXY_SLEEPER")
        if not path:
            sys.exit("step_proxy: GIL held needs STEP_PROXY_SLEEPER (build/bench/libproxy_sleeper.so)")
        sleeper = ctypes.PyDLL(path)
    lib = ctypes.PyDLL(sys.argv[1]) if gil == "held" else ctypes.CDLL(sys.argv[1])
    calibrate(work_us)  # the interpreter specialises the loop on its first runs: warm it up
    iters = calibrate(work_us)
    times = [[] for _ in range(threads)]
    cpu = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def worker(k):
        step = Step(lib, iters, sleeper)
        start.wait()

        def loop():
            for _ in range(steps):
                t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                step.run()
                times[k].append((t0, time.perf_counter_ns()))
                cpu[k].append(time.thread_time_ns() - c0)

        nest(DEPTH - 4, loop)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    if sleeper and sleeper.proxy_sleeper_start():
        sys.exit("step_proxy: cannot start the sleeper thread")
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if sleeper:
        sleeper.proxy_sleeper_stop()
    steady = sorted(t1 - t0 for per in times for t0, t1 in per[WARMUP:])
    first = min(per[WARMUP][0] for per in times)
    last = max(per[-1][1] for per in times)
    print(json.dumps({
        "steps": steps, "threads": threads, "work_us": work_us, "gil": gil,
        "step_ms": (last - first) / (steps - WARMUP) / 1e6,
        "step_ms_median": statistics.median(steady) / 1e6,
        "step_ms_p90": steady[int(len(steady) * 0.9)] / 1e6,
        # The stepping threads' own CPU a step (user and system: a probe's trap and program
        # run in the thread that called), steady steps: with the GIL held it is serial, so
        # what a tracer adds to it is what it adds to the step, without the wall time's
        # noise of how the GIL is handed over.
        "cpu_ms": sum(sum(per[WARMUP:]) for per in cpu) / (threads * (steps - WARMUP)) / 1e6,
        "made": {"cudaLaunchKernel": LAUNCHES * steps * threads,
                 "cudaMemcpyAsync": COPIES * steps * threads,
                 "cudaStreamSynchronize": steps * threads},
    }))


main()

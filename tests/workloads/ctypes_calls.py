"""Python stacks: cudaMalloc through the real libcudart via ctypes, from two functions at
lines this script prints ("load_weights_line N", "warmup_line M"), each called from main().
Usage: python3 ctypes_calls.py /path/to/libcudart.so.13 [calls] [gate]
With "gate", it waits for a line on stdin after printing its pid and before its calls: a test
lets it go once the tracer has configured this process's interpreter."""
import ctypes
import os
import sys


def load_weights(lib, n):
    p = ctypes.c_void_p()
    rc = lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)); line = sys._getframe().f_lineno
    return rc, line


def warmup(lib):
    rc = lib.cudaDeviceSynchronize(); line = sys._getframe().f_lineno
    return rc, line


def main():
    lib = ctypes.CDLL(sys.argv[1])
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print("pid", os.getpid(), flush=True)
    if len(sys.argv) > 3 and sys.argv[3] == "gate":
        sys.stdin.readline()
    for i in range(calls):
        rc, line = load_weights(lib, 4096 * (i + 1))
    print("load_weights_line", line, "ret", rc, flush=True)
    for i in range(calls):
        rc, line = warmup(lib)
    print("warmup_line", line, "ret", rc, flush=True)
    print("calls", calls, flush=True)


if __name__ == "__main__":
    main()

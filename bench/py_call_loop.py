"""Calls a library function through ctypes in a Python loop (two frames deep) and prints ns
per call as JSON: the Python side of the stack-capture overhead benchmark.
   python3 py_call_loop.py LIB SYMBOL N"""
import ctypes
import json
import sys
import time


def inner(f, n):
    arg = ctypes.c_void_p(1)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        f(arg)
    return time.perf_counter_ns() - t0


def outer(f, n):
    return inner(f, n)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    f = getattr(lib, sys.argv[2])
    n = int(sys.argv[3])
    outer(f, 1000)  # warm-up
    ns = outer(f, n)
    print(json.dumps({"calls": n, "ns_per_call": ns / n}))


main()

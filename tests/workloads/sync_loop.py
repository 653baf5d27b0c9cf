"""pprof: waits for the GPU in cudaStreamSynchronize from one known line (the real libcudart
through ctypes), then runs on the CPU in one known function, so the exported profile's
gpu_wait and cpu tops are known. Prints "pid N", "sync_line N", "spin_line N".
Usage: python3 sync_loop.py /path/to/libcudart.so.13 [syncs] [spin_seconds]"""
import ctypes
import os
import sys
import time


def wait_for_gpu(lib, n):
    line = 0
    for _ in range(n):
        lib.cudaStreamSynchronize(None); line = sys._getframe().f_lineno
    return line


def spin(seconds):
    line = sys._getframe().f_lineno + 3
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end: x += 1
    return line


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
    syncs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    print("pid", os.getpid(), flush=True)
    print("sync_line", wait_for_gpu(lib, syncs), flush=True)
    print("spin_line", spin(seconds), flush=True)


if __name__ == "__main__":
    main()

/* A stand-in libcudart.so.13 with the real exported names and signatures, for hosts without
 * the CUDA toolkit and for planted-fault scenarios. Unlike the real runtime without a GPU,
 * it succeeds and writes its output pointers, and its behaviour is steerable:
 *   INGERO_FAKE_SYNC_US=N     cudaStreamSynchronize spins/sleeps N microseconds
 *   INGERO_FAKE_SYNC_BLOCK=1  cudaStreamSynchronize never returns (exit-mid-call tests)
 *   INGERO_FAKE_SYNC_FD=N     cudaStreamSynchronize blocks reading one byte from file
 *                             descriptor N (a pipe the test holds): it returns 0 once a byte
 *                             comes, 999 (cudaErrorUnknown) at end of file (hung-call tests)
 *   INGERO_FAKE_SYNC_SPIN_US=N cudaStreamSynchronize busy-waits N microseconds on the CPU, as a
 *                             spinning sync does (planted CPU-contention scenarios)
 *   INGERO_FAKE_LAUNCH_US=N   cudaLaunchKernel sleeps N microseconds
 *   INGERO_FAKE_LAUNCH_FD=N   a cudaLaunchKernel of function 0xb10c blocks reading one byte from
 *                             file descriptor N before it reaches the driver (a launch in
 *                             flight for as long as a test wants)
 *   INGERO_FAKE_LAUNCH_SPIN_EVERY=K (with INGERO_FAKE_LAUNCH_SPIN_US=N) every K-th
 *                             cudaLaunchKernel of the process busy-waits N microseconds on the
 *                             CPU: a known share of slow launches, whatever the machine
 *   INGERO_FAKE_FAULT_AFTER=N a sticky device fault: the first N cudaStreamSynchronize succeed,
 *                             every later one returns 700 (cudaErrorIllegalAddress), and so
 *                             does every cudaLaunchKernel after the first that failed
 * cudaDeviceSynchronize calls the driver's cuCtxSynchronize and cudaLaunchKernel its
 * cuLaunchKernel, as the real runtime does: nested calls. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  unsigned x, y, z;
} dim3;
extern int cuCtxSynchronize(void);
extern int cuMemAlloc_v2(unsigned long long* p, size_t n);
extern int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shm, void* stream, void** params, void** extra);

/* Busy-waits `us` microseconds on the CPU. */
static void spin_us(long us) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < us * 1000L);
}

__attribute__((visibility("default"))) int cudaMalloc(void** p, size_t n) {
  *p = (void*)(uintptr_t)(0xd0000000u + n);
  return 0;
}
__attribute__((visibility("default"))) int cudaFree(void* p) { return p ? 0 : 1; }
__attribute__((visibility("default"))) int cudaMemcpyAsync(void* d, const void* s, size_t n,
                                                           int kind, void* stream) {
  (void)d, (void)s, (void)n, (void)kind, (void)stream;
  return 0;
}
/* INGERO_FAKE_FAULT_AFTER: set by the first cudaStreamSynchronize that reports the fault. */
static int faulted;

__attribute__((visibility("default"))) int cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** a,
                                                            size_t shm, void* stream) {
  const char* us = getenv("INGERO_FAKE_LAUNCH_US");  // a slow launch path (fleet metrics test)
  if (us) usleep((useconds_t)atoi(us));
  const char* fd = getenv("INGERO_FAKE_LAUNCH_FD");
  if (fd && f == (const void*)0xb10c) {
    char c;
    while (read(atoi(fd), &c, 1) < 0) {
    }
  }
  const char* every = getenv("INGERO_FAKE_LAUNCH_SPIN_EVERY");
  const char* spin = getenv("INGERO_FAKE_LAUNCH_SPIN_US");
  static unsigned long launches;
  if (every && spin && atol(every) > 0 && ++launches % (unsigned long)atol(every) == 0)
    spin_us(atol(spin));
  int r = cuLaunchKernel((void*)f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shm, stream, a, 0);
  return faulted ? 700 : r;
}
__attribute__((visibility("default"))) int cudaStreamSynchronize(void* stream) {
  (void)stream;
  if (getenv("INGERO_FAKE_SYNC_BLOCK")) {
    for (;;) pause();
  }
  const char* fd = getenv("INGERO_FAKE_SYNC_FD");
  if (fd) {
    char c;
    ssize_t n;
    do n = read(atoi(fd), &c, 1);
    while (n < 0);
    return n == 1 ? 0 : 999;
  }
  const char* us = getenv("INGERO_FAKE_SYNC_US");
  if (us) usleep((useconds_t)atoi(us));
  const char* spin = getenv("INGERO_FAKE_SYNC_SPIN_US");
  if (spin) spin_us(atol(spin));
  const char* fault = getenv("INGERO_FAKE_FAULT_AFTER");
  static long syncs;
  if (fault && ++syncs > atol(fault)) faulted = 1;
  return faulted ? 700 : 0;
}
__attribute__((visibility("default"))) int cudaDeviceSynchronize(void) {
  return cuCtxSynchronize();
}
__attribute__((visibility("default"))) int cudaMallocManaged(void** p, size_t n, unsigned flags) {
  (void)flags;
  unsigned long long d = 0;
  int r = cuMemAlloc_v2(&d, n);
  *p = (void*)(uintptr_t)d;
  return r;
}

/* CUDA graphs: handles are distinct fake addresses; capture, instantiate and launch succeed. */
static uintptr_t next_graph = 0x6a000000u, next_exec = 0x6e000000u;
__attribute__((visibility("default"))) int cudaStreamBeginCapture(void* stream, int mode) {
  (void)stream, (void)mode;
  return 0;
}
__attribute__((visibility("default"))) int cudaStreamEndCapture(void* stream, void** graph) {
  (void)stream;
  next_graph += 0x100;
  *graph = (void*)next_graph;
  return 0;
}
__attribute__((visibility("default"))) int cudaGraphInstantiate(void** exec, void* graph,
                                                                unsigned long long flags) {
  (void)flags;
  if (!graph) return 1; /* cudaErrorInvalidValue */
  next_exec += 0x100;
  *exec = (void*)next_exec;
  return 0;
}
__attribute__((visibility("default"))) int cudaGraphLaunch(void* exec, void* stream) {
  (void)stream;
  return exec ? 0 : 400; /* cudaErrorInvalidResourceHandle */
}

/* A stand-in libamdhip64.so.5 for planted-fault scenarios: the CUDA fake's behaviour with
 * HIP names. INGERO_FAKE_SYNC_SPIN_US makes hipStreamSynchronize spin on the CPU. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  unsigned x, y, z;
} dim3;

__attribute__((visibility("default"))) int hipMalloc(void** p, size_t n) {
  *p = (void*)(uintptr_t)(0xd0000000u + n);
  return 0;
}
__attribute__((visibility("default"))) int hipLaunchKernel(const void* f, dim3 g, dim3 b, void** a,
                                                           size_t shm, void* stream) {
  (void)f, (void)g, (void)b, (void)a, (void)shm, (void)stream;
  return 0;
}
__attribute__((visibility("default"))) int hipStreamSynchronize(void* stream) {
  (void)stream;
  const char* spin = getenv("INGERO_FAKE_SYNC_SPIN_US");
  if (spin) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long limit = atol(spin) * 1000L;
    do {
      clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < limit);
  }
  return 0;
}

/* Kernel registration and look-up (tests/workloads/hip_kernels.c), as the HIP runtime's:
 * a module constructor registers each host stub with its device name, and
 * hipModuleGetFunction hands out a handle by name. */
__attribute__((visibility("default"))) void __hipRegisterFunction(
    void* modules, const void* hostFunction, char* deviceFunction, const char* deviceName,
    unsigned threadLimit, void* tid, void* bid, void* blockDim, void* gridDim, int* wSize) {
  (void)modules, (void)hostFunction, (void)deviceFunction, (void)deviceName, (void)threadLimit;
  (void)tid, (void)bid, (void)blockDim, (void)gridDim, (void)wSize;
}
__attribute__((visibility("default"))) int hipModuleGetFunction(void** f, void* module,
                                                                const char* name) {
  (void)name;
  static int handles[16];
  static int next;
  if (!module) return 1;
  *f = &handles[next++ % 16];
  return 0;
}
__attribute__((visibility("default"))) int hipModuleLaunchKernel(void* f, unsigned gx, unsigned gy,
                                                                 unsigned gz, unsigned bx,
                                                                 unsigned by, unsigned bz,
                                                                 unsigned shm, void* stream,
                                                                 void** params, void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shm, (void)stream;
  (void)params, (void)extra;
  return 0;
}

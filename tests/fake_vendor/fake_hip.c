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

/* The stand-in CUDA driver of bench/pair_runtime.c: launches and syncs that succeed at once.
 * -O2 with frame pointers, as the runtime. */
#include <stddef.h>

static volatile unsigned long launches;

/* Out of line, so that cuLaunchKernel is not a leaf and opens with `push %rbp` as a real
 * driver's entry points do (a leaf's first instruction here was a RIP-relative load, which a
 * uprobe single-steps out of line: ~10 us a trap on this VM instead of ~1). */
__attribute__((noinline)) static void count(unsigned long n) { launches += n; }

__attribute__((visibility("default"))) int cuLaunchKernel(void* f, unsigned gx, unsigned gy,
                                                          unsigned gz, unsigned bx, unsigned by,
                                                          unsigned bz, unsigned shm, void* stream,
                                                          void** params, void** extra) {
  (void)f, (void)gy, (void)gz, (void)by, (void)bz, (void)shm, (void)stream, (void)params;
  (void)extra;
  count(gx + bx);
  return 0;
}

__attribute__((visibility("default"))) int cuStreamSynchronize(void* stream) {
  (void)stream;
  count(1); /* not a leaf: see count() */
  return 0;
}
__attribute__((visibility("default"))) int cuMemcpyAsync(void* dst, const void* src, size_t bytes,
                                                         void* stream) {
  (void)dst, (void)src, (void)stream;
  count(bytes);
  return 0;
}

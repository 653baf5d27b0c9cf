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

/* Kernel look-ups as a library that asks before each launch (cuDNN; bench/lookup_loop.c): a
 * library's kernels by name, and a kernel's function in the current context. A handle stands
 * for each name (the driver keeps one per kernel); a kernel's function is the next word. */
static const char* kernel_names[16];
__attribute__((visibility("default"))) int cuLibraryGetKernel(void** kernel, void* library,
                                                              const char* name) {
  count(1); /* first: the entry opens with `push %rbp` (a test first is single-stepped) */
  if (!kernel || !library || !name) return 1; /* CUDA_ERROR_INVALID_VALUE */
  unsigned i = 0;
  for (; i < 16 && kernel_names[i]; i++)
    if (kernel_names[i] == name) break;
  if (i == 16) return 500; /* CUDA_ERROR_NOT_FOUND */
  kernel_names[i] = name;
  *kernel = (void*)&kernel_names[i];
  return 0;
}
__attribute__((visibility("default"))) int cuKernelGetFunction(void** func, void* kernel) {
  count(1); /* first: see cuLibraryGetKernel */
  if (!func || !kernel) return 1;
  *func = (char*)kernel + 1;
  return 0;
}

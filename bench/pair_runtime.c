/* A stand-in CUDA runtime for launch benchmarks (bench/launch_cost.sh): cudaLaunchKernel calls
 * the stand-in driver's cuLaunchKernel and checks its answer, as the real libcudart does, so a
 * launch enters both. Ordinary -O2 code with frame pointers: its first instruction is
 * `push %rbp`, as the real libcudart's are, which the kernel emulates at a uprobe instead of
 * single-stepping it (a single-stepped first instruction costs ~16 us a trap here and hides
 * every other cost). */
#include <stddef.h>

typedef struct {
  unsigned x, y, z;
} dim3;

extern int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shm, void* stream, void** params, void** extra);
extern int cuStreamSynchronize(void* stream);
extern int cuMemcpyAsync(void* dst, const void* src, size_t bytes, void* stream);

static __thread int last_error;

__attribute__((visibility("default"))) int cudaLaunchKernel(const void* f, dim3 g, dim3 b,
                                                            void** args, size_t shm, void* stream) {
  int rc = cuLaunchKernel((void*)f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shm, stream, args, 0);
  if (rc) last_error = rc;
  return rc;
}

/* The step proxy's copies (bench/step_proxy.sh, PAIR=1): the copy enters the driver, as the
 * real runtime's does. */
__attribute__((visibility("default"))) int cudaMemcpyAsync(void* dst, const void* src,
                                                           size_t bytes, int kind, void* stream) {
  (void)kind;
  int rc = cuMemcpyAsync(dst, src, bytes, stream);
  if (rc) last_error = rc;
  return rc;
}
__attribute__((visibility("default"))) int cudaStreamSynchronize(void* stream) {
  int rc = cuStreamSynchronize(stream);
  if (rc) last_error = rc;
  return rc;
}

__attribute__((visibility("default"))) int cudaGetLastError(void) {
  int e = last_error;
  last_error = 0;
  return e;
}

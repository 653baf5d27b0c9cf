/* A stand-in driver library (libcuda.so.1) for the fake runtime's nested calls. */
#include <stddef.h>

__attribute__((visibility("default"))) int cuCtxSynchronize(void) { return 0; }
__attribute__((visibility("default"))) int cuMemAlloc_v2(unsigned long long* p, size_t n) {
  *p = 0xe0000000ull + n;
  return 0;
}
__attribute__((visibility("default"))) int cuLaunchKernel(void* f, unsigned gx, unsigned gy,
                                                          unsigned gz, unsigned bx, unsigned by,
                                                          unsigned bz, unsigned shm, void* stream,
                                                          void** params, void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shm, (void)stream;
  (void)params, (void)extra;
  return 0;
}

/* Driver-API kernel look-ups (tests/workloads/driver_kernels.c): a module's functions are
 * handles the driver hands out by name, as cuModuleGetFunction does; their names are the
 * strings the program asked for. */
#include <stdlib.h>
#include <string.h>

struct fake_func {
  char name[256];
};
/* As the driver does, a module hands out one handle per function: a repeated look-up gets the
 * same one. */
static struct fake_func* fake_funcs[64];
__attribute__((visibility("default"))) int cuModuleLoadData(void** module, const void* image) {
  (void)image;
  *module = (void*)0xa0d0;
  return 0;
}
__attribute__((visibility("default"))) int cuModuleGetFunction(void** f, void* module,
                                                               const char* name) {
  if (!module || !name) return 1;                      /* CUDA_ERROR_INVALID_VALUE */
  if (strcmp(name, "missing_kernel") == 0) return 500; /* CUDA_ERROR_NOT_FOUND */
  size_t i = 0;
  for (; i < 64 && fake_funcs[i]; i++)
    if (strcmp(fake_funcs[i]->name, name) == 0) break;
  if (i == 64) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  if (!fake_funcs[i]) {
    fake_funcs[i] = calloc(1, sizeof *fake_funcs[i]);
    strncpy(fake_funcs[i]->name, name, sizeof fake_funcs[i]->name - 1);
  }
  *f = fake_funcs[i];
  return 0;
}
__attribute__((visibility("default"))) int cuFuncGetName(const char** name, void* f) {
  *name = ((struct fake_func*)f)->name;
  return 0;
}

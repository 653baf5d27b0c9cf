/* HIP kernels for the kernel-name tests (tests/bpf/kernel_names_test.cc), through the
 * libamdhip64 given as argv[1] (the stand-in, tests/fake_vendor/fake_hip.c): two host stubs
 * registered with __hipRegisterFunction as a HIP module's constructor registers them, and a
 * module function looked up with hipModuleGetFunction.
 *
 * Prints "pid N" and "ready", waits for a line on stdin, then registers reduce_stub as
 * "_Z6reducePfi" and axpy_stub as "axpy_kernel", launches them with hipLaunchKernel 3 and 2
 * times, looks up "_ZN4conv7forwardEPKfPf" and launches it with hipModuleLaunchKernel 4 times,
 * prints "launched" and waits for stdin to close. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

typedef struct {
  unsigned x, y, z;
} dim3;
typedef void (*hip_register_fn)(void*, const void*, char*, const char*, unsigned, void*, void*,
                                void*, void*, int*);
typedef int (*launch_t)(const void*, dim3, dim3, void**, size_t, void*);
typedef int (*get_t)(void**, void*, const char*);
typedef int (*module_launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, void*, void**, void**);

/* Host stubs: distinct code, so distinct addresses. */
static volatile int sink;
__attribute__((noinline, used)) static void reduce_stub(void) { sink = 1; }
__attribute__((noinline, used)) static void axpy_stub(void) { sink = 2; }

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
  hip_register_fn reg = (hip_register_fn)dlsym(h, "__hipRegisterFunction");
  launch_t launch = (launch_t)dlsym(h, "hipLaunchKernel");
  get_t get = (get_t)dlsym(h, "hipModuleGetFunction");
  module_launch_t module_launch = (module_launch_t)dlsym(h, "hipModuleLaunchKernel");
  if (!reg || !launch || !get || !module_launch) return 2;
  printf("pid %d\nready\n", (int)getpid());
  char line[64];
  if (!fgets(line, sizeof line, stdin)) return 2;
  void* modules = NULL;
  reg(&modules, (const void*)reduce_stub, "_Z6reducePfi", "_Z6reducePfi", (unsigned)-1, NULL, NULL,
      NULL, NULL, NULL);
  reg(&modules, (const void*)axpy_stub, "axpy_kernel", "axpy_kernel", (unsigned)-1, NULL, NULL,
      NULL, NULL, NULL);
  dim3 g = {1, 1, 1}, b = {64, 1, 1};
  for (int i = 0; i < 3; i++) launch((const void*)reduce_stub, g, b, NULL, 0, NULL);
  for (int i = 0; i < 2; i++) launch((const void*)axpy_stub, g, b, NULL, 0, NULL);
  void* conv = NULL;
  if (get(&conv, (void*)0x1, "_ZN4conv7forwardEPKfPf") != 0) return 3;
  for (int i = 0; i < 4; i++) module_launch(conv, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL);
  printf("launched\n");
  while (fgets(line, sizeof line, stdin)) {
  }
  return 0;
}

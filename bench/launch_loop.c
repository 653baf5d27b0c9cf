/* Kernel launches through a CUDA runtime in a tight loop; prints ns per launch.
 *   launch_loop LIBCUDART N [SITES]     N cudaLaunchKernel, spread over SITES call sites
 *                                       (default 4), then one cudaStreamSynchronize
 * With LAUNCH_LOOP_WAIT set, prints "ready PID" and waits for a line on stdin first. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  unsigned x, y, z;
} dim3;
typedef int (*launch_t)(const void*, dim3, dim3, void**, size_t, void*);
typedef int (*sync_t)(void*);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* Distinct call sites, as a training step launches from many lines. */
__attribute__((noinline)) static int site0(launch_t l, dim3 g, dim3 b) {
  return l((void*)0x10, g, b, 0, 0, 0);
}
__attribute__((noinline)) static int site1(launch_t l, dim3 g, dim3 b) {
  return l((void*)0x20, g, b, 0, 0, 0);
}
__attribute__((noinline)) static int site2(launch_t l, dim3 g, dim3 b) {
  return l((void*)0x30, g, b, 0, 0, 0);
}
__attribute__((noinline)) static int site3(launch_t l, dim3 g, dim3 b) {
  return l((void*)0x40, g, b, 0, 0, 0);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  launch_t launch = (launch_t)dlsym(h, "cudaLaunchKernel");
  sync_t sync = (sync_t)dlsym(h, "cudaStreamSynchronize");
  if (!launch || !sync) return 2;
  long n = atol(argv[2]);
  int sites = argc > 3 ? atoi(argv[3]) : 4;
  if (sites < 1 || sites > 4) sites = 4;
  if (getenv("LAUNCH_LOOP_WAIT")) {
    printf("ready %d\n", getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof(line), stdin)) return 3;
  }
  dim3 g = {64, 1, 1}, b = {256, 1, 1};
  volatile int sink = 0;
  double t0 = now();
  for (long i = 0; i < n; i++) {
    switch (i % sites) {
      case 0:
        sink += site0(launch, g, b);
        break;
      case 1:
        sink += site1(launch, g, b);
        break;
      case 2:
        sink += site2(launch, g, b);
        break;
      default:
        sink += site3(launch, g, b);
        break;
    }
  }
  double t1 = now();
  sink += sync(0);
  printf("{\"calls\": %ld, \"ns_per_call\": %.1f}\n", n, (t1 - t0) * 1e9 / n);
  return 0;
}

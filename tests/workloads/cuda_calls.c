/* A workload with exactly known CUDA traffic, for tests/bpf and the quick start.
 *
 * It calls the real CUDA runtime (linked normally) and the driver API through dlopen of the
 * path given as argv[1] (the toolkit's stub libcuda.so when no driver is installed). With no
 * GPU every call fails, but every call enters the library with real arguments, which is what
 * the tracer sees. It prints one line per call: "<op> <tid> <ret>", plus "pid <pid>".
 * Optional argv[2]: repeat count for the whole sequence (default 1); argv[3] "cooperative":
 * cooperative launches instead (cooperative_calls).
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }
#define LOG(op, r) printf("%s %d %d\n", op, (int)gettid_(), (int)(r))

static cudaStream_t kStream = (cudaStream_t)0x5151;

static void* second_thread(void* arg) {
  (void)arg;
  for (int i = 0; i < 3; i++)
    LOG("cudaStreamSynchronize", cudaStreamSynchronize((cudaStream_t)0x7777));
  return NULL;
}

typedef int (*cuInit_t)(unsigned);
typedef int (*cuMemAlloc_t)(unsigned long long*, size_t);
typedef int (*cuLaunchKernel_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, void*, void**, void**);
typedef int (*cuMemcpyHtoD_t)(unsigned long long, const void*, size_t);
typedef int (*cuCtxSynchronize_t)(void);
typedef int (*cuStreamSynchronize_t)(void*);

static void driver_calls(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(2);
  }
  cuInit_t cuInit = (cuInit_t)dlsym(h, "cuInit");
  cuMemAlloc_t cuMemAlloc = (cuMemAlloc_t)dlsym(h, "cuMemAlloc_v2");
  cuLaunchKernel_t cuLaunchKernel = (cuLaunchKernel_t)dlsym(h, "cuLaunchKernel");
  cuMemcpyHtoD_t cuMemcpyHtoD = (cuMemcpyHtoD_t)dlsym(h, "cuMemcpyHtoD_v2");
  cuCtxSynchronize_t cuCtxSynchronize = (cuCtxSynchronize_t)dlsym(h, "cuCtxSynchronize");
  cuStreamSynchronize_t cuStreamSynchronize =
      (cuStreamSynchronize_t)dlsym(h, "cuStreamSynchronize");
  (void)cuInit(0);
  unsigned long long d = 0;
  for (int i = 0; i < 2; i++) LOG("cuMemAlloc", cuMemAlloc(&d, 4096));
  for (int i = 0; i < 3; i++)
    LOG("cuLaunchKernel",
        cuLaunchKernel((void*)0xbeef, 1, 2, 3, 4, 5, 6, 512, (void*)0x9999, NULL, NULL));
  char buf[1000];
  LOG("cuMemcpyHtoD", cuMemcpyHtoD(0x1000, buf, sizeof(buf)));
  LOG("cuCtxSynchronize", cuCtxSynchronize());
  LOG("cuStreamSynchronize", cuStreamSynchronize((void*)0x9999));
}

static void runtime_calls(void) {
  void* p[8] = {0};
  for (int i = 1; i <= 7; i++) LOG("cudaMalloc", cudaMalloc(&p[i], (size_t)1024 * i));
  for (int i = 1; i <= 7; i++) LOG("cudaFree", cudaFree((void*)(uintptr_t)(0x100000 * i)));
  static char host[8192];
  for (int i = 0; i < 3; i++)
    LOG("cudaMemcpy", cudaMemcpy((void*)0x200000, host, 4096, cudaMemcpyHostToDevice));
  for (int i = 0; i < 2; i++)
    LOG("cudaMemcpyAsync",
        cudaMemcpyAsync(host, (void*)0x200000, 8192, cudaMemcpyDeviceToHost, kStream));
  LOG("cudaMemcpy2D", cudaMemcpy2D((void*)0x300000, 128, host, 64, 64, 32, cudaMemcpyHostToDevice));
  LOG("cudaMemset", cudaMemset((void*)0x400000, 0, 2048));
  dim3 grid = {8, 4, 2}, block = {128, 2, 1};
  for (int i = 0; i < 4; i++)
    LOG("cudaLaunchKernel", cudaLaunchKernel((const void*)0xf00d, grid, block, NULL, 256, kStream));
  cudaLaunchConfig_t cfg = {0};
  cfg.gridDim = (dim3){16, 1, 1};
  cfg.blockDim = (dim3){256, 1, 1};
  cfg.dynamicSmemBytes = 1024;
  cfg.stream = kStream;
  LOG("cudaLaunchKernelExC", cudaLaunchKernelExC(&cfg, (const void*)0xf00e, NULL));
  for (int i = 0; i < 5; i++) LOG("cudaStreamSynchronize", cudaStreamSynchronize(kStream));
  LOG("cudaDeviceSynchronize", cudaDeviceSynchronize());
  cudaGraph_t graph = 0;
  cudaGraphExec_t exec = 0;
  LOG("cudaStreamBeginCapture", cudaStreamBeginCapture(kStream, cudaStreamCaptureModeGlobal));
  LOG("cudaStreamEndCapture", cudaStreamEndCapture(kStream, &graph));
  LOG("cudaGraphInstantiate", cudaGraphInstantiate(&exec, graph, 0));
  LOG("cudaGraphLaunch", cudaGraphLaunch(exec, kStream));
}

/* With argv[3] "cooperative": cooperative launches, runtime and driver, a sync between them. A
 * runtime launch refused before it reaches the driver (no GPU) and a driver launch right after
 * it on the same thread, read after the process exited, would be taken for one launch
 * (capture/launch_nesting.h: folded by order); the sync keeps them apart. */
typedef int (*cuLaunchCooperativeKernel_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned,
                                           unsigned, unsigned, void*, void**);

static void cooperative_calls(const char* path) {
  dim3 grid = {6, 5, 1}, block = {64, 1, 1};
  for (int i = 0; i < 3; i++)
    LOG("cudaLaunchCooperativeKernel",
        cudaLaunchCooperativeKernel((const void*)0xc00b, grid, block, NULL, 128, kStream));
  LOG("cudaStreamSynchronize", cudaStreamSynchronize(kStream));
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(2);
  }
  cuLaunchCooperativeKernel_t launch =
      (cuLaunchCooperativeKernel_t)dlsym(h, "cuLaunchCooperativeKernel");
  for (int i = 0; i < 2; i++)
    LOG("cuLaunchCooperativeKernel",
        launch((void*)0xc0de, 7, 1, 1, 32, 2, 1, 64, (void*)0x9999, NULL));
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("pid %d\n", (int)getpid());
  int repeat = argc > 2 ? atoi(argv[2]) : 1;
  if (argc > 3 && strcmp(argv[3], "cooperative") == 0) {
    cooperative_calls(argv[1]);
    return 0;
  }
  for (int r = 0; r < repeat; r++) {
    runtime_calls();
    pthread_t t;
    pthread_create(&t, NULL, second_thread, NULL);
    pthread_join(t, NULL);
    if (argc > 1 && argv[1][0]) driver_calls(argv[1]);
  }
  return 0;
}

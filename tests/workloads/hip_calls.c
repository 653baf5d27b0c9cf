/* Known HIP traffic through the real libamdhip64 (dlopen; no ROCm headers needed). With no
 * GPU every call fails, but each enters the library with real arguments.
 * Prints "pid N" and "<op> <tid> <ret>" per call. With argv[2] "more", then the calls PyTorch
 * on ROCm and per-thread-stream programs make: hipMemcpyWithStream, hipMemcpyPeer,
 * hipLaunchCooperativeKernel and the _spt twins (logged under their base names, as traced). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
  unsigned x, y, z;
} dim3;
#define LOG(op, r) printf("%s %ld %d\n", op, (long)syscall(SYS_gettid), (int)(r))

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  void* h = dlopen(argc > 1 ? argv[1] : "libamdhip64.so.5", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  printf("pid %d\n", getpid());
  int (*hipMalloc)(void**, size_t) = dlsym(h, "hipMalloc");
  int (*hipFree)(void*) = dlsym(h, "hipFree");
  int (*hipMemcpy)(void*, const void*, size_t, int) = dlsym(h, "hipMemcpy");
  int (*hipMemcpyAsync)(void*, const void*, size_t, int, void*) = dlsym(h, "hipMemcpyAsync");
  int (*hipLaunchKernel)(const void*, dim3, dim3, void**, size_t, void*) =
      dlsym(h, "hipLaunchKernel");
  int (*hipModuleLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, void*, void**, void**) = dlsym(h, "hipModuleLaunchKernel");
  int (*hipStreamSynchronize)(void*) = dlsym(h, "hipStreamSynchronize");
  int (*hipDeviceSynchronize)(void) = dlsym(h, "hipDeviceSynchronize");
  void* p = NULL;
  for (int i = 1; i <= 3; i++) LOG("hipMalloc", hipMalloc(&p, (size_t)2048 * i));
  LOG("hipFree", hipFree((void*)0x700000));
  static char host[65536];
  for (int i = 0; i < 2; i++) LOG("hipMemcpy", hipMemcpy((void*)0x800000, host, 65536, 1));
  LOG("hipMemcpyAsync", hipMemcpyAsync(host, (void*)0x800000, 4096, 2, (void*)0xa11));
  dim3 g = {32, 2, 1}, b = {64, 1, 1};
  for (int i = 0; i < 2; i++)
    LOG("hipLaunchKernel", hipLaunchKernel((void*)0xabc0, g, b, NULL, 128, (void*)0xa11));
  LOG("hipModuleLaunchKernel",
      hipModuleLaunchKernel((void*)0xdef0, 7, 8, 9, 10, 11, 12, 64, (void*)0xa22, NULL, NULL));
  for (int i = 0; i < 2; i++) LOG("hipStreamSynchronize", hipStreamSynchronize((void*)0xa11));
  LOG("hipDeviceSynchronize", hipDeviceSynchronize());
  if (argc > 2 && argv[2][0] == 'm') {
    int (*with_stream)(void*, const void*, size_t, int, void*) = dlsym(h, "hipMemcpyWithStream");
    int (*peer)(void*, int, const void*, int, size_t) = dlsym(h, "hipMemcpyPeer");
    int (*coop)(const void*, dim3, dim3, void**, unsigned, void*) =
        dlsym(h, "hipLaunchCooperativeKernel");
    int (*launch_spt)(const void*, dim3, dim3, void**, size_t, void*) =
        dlsym(h, "hipLaunchKernel_spt");
    int (*async_spt)(void*, const void*, size_t, int, void*) = dlsym(h, "hipMemcpyAsync_spt");
    int (*sync_spt)(void*) = dlsym(h, "hipStreamSynchronize_spt");
    if (!with_stream || !peer || !coop || !launch_spt || !async_spt || !sync_spt) {
      fprintf(stderr, "this libamdhip64 lacks a function of \"more\"\n");
      return 3;
    }
    for (int i = 0; i < 3; i++)
      LOG("hipMemcpyWithStream", with_stream(host, (void*)0x800000, 512, 2, (void*)0xa33));
    LOG("hipMemcpyPeer", peer((void*)0x900000, 1, (void*)0x800000, 0, 8192));
    LOG("hipLaunchCooperativeKernel", coop((void*)0xabc8, g, b, NULL, 256, (void*)0xa33));
    LOG("hipLaunchKernel", launch_spt((void*)0xabc0, g, b, NULL, 128, (void*)0));
    LOG("hipMemcpyAsync", async_spt(host, (void*)0x800000, 1024, 2, (void*)0));
    LOG("hipStreamSynchronize", sync_spt((void*)0));
  }
  return 0;
}

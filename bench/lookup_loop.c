/* Launches as cuDNN makes them (bench/lookup_cost.sh): before each cuLaunchKernel, the kernel is
 * looked up in its library by name (cuLibraryGetKernel) and its function in the current context
 * (cuKernelGetFunction), each time, over 4 kernels in turn. Prints ns per launch.
 *   lookup_loop LIBCUDA N [plain]       plain: the launches alone, no look-ups
 *   lookup_loop LIBCUDA N mix LIBCUDART N steps of ResNet-18's launches on an H200
 *       (fixtures/h100/README.md): 264 cudaLaunchKernel through LIBCUDART (which enters
 *       LIBCUDA's cuLaunchKernel), 64 launches after their two look-ups as above (cuDNN's), 11
 *       plain cuLaunchKernel; prints ns per launch and per step, and counts launches.
 * LOOKUP_WARM_MS=T: the same loop runs T ms before the N launches (or steps) timed (a tracer's
 * steady state: its look-up probes at rest, capture/lookup_rest.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*kernel_t)(void**, void*, const char*);
typedef int (*func_t)(void**, void*);
typedef int (*launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        void*, void**, void**);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static const char* const kNames[4] = {
    "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64",
    "sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64",
    "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64",
    "_Z20nhwcAddPaddingKernelI13__nv_bfloat16S0_fLb0EEvPKT_PT0_iiiii"};

typedef struct {
  unsigned x, y, z;
} dim3;
typedef int (*rt_launch_t)(const void*, dim3, dim3, void**, size_t, void*);

static kernel_t get_kernel;
static rt_launch_t rt_launch; /* mix: the runtime's cudaLaunchKernel */
static func_t get_func;
static launch_t launch;
static int plain;
static char library;   /* a CUlibrary */
static void* funcs[4]; /* plain: looked up once, before the loop */

/* Launch i of the loop (its look-ups first, unless plain): 0, or what the calls returned. */
static int one_launch(long i) {
  void* f = funcs[i & 3];
  int r = 0;
  if (!plain) {
    void* kernel = NULL;
    r += get_kernel(&kernel, &library, kNames[i & 3]);
    r += get_func(&f, kernel);
  }
  return r + launch(f, 64, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL);
}

/* Step i of the mix: its launches, in ResNet-18's proportions. */
enum { kRuntimeLaunches = 264, kCudnnLaunches = 64, kDriverLaunches = 11 };
enum { kStepLaunches = kRuntimeLaunches + kCudnnLaunches + kDriverLaunches };
static int one_step(long i) {
  int r = 0;
  dim3 g = {64, 1, 1}, b = {256, 1, 1};
  for (int k = 0; k < kRuntimeLaunches; k++) r += rt_launch(funcs[k & 3], g, b, NULL, 0, NULL);
  for (int k = 0; k < kCudnnLaunches; k++) r += one_launch(i * kCudnnLaunches + k);
  for (int k = 0; k < kDriverLaunches; k++)
    r += launch(funcs[k & 3], 64, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL);
  return r;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  get_kernel = (kernel_t)dlsym(h, "cuLibraryGetKernel");
  get_func = (func_t)dlsym(h, "cuKernelGetFunction");
  launch = (launch_t)dlsym(h, "cuLaunchKernel");
  if (!get_kernel || !get_func || !launch) return 2;
  long n = atol(argv[2]);
  plain = argc > 3 && strcmp(argv[3], "plain") == 0;
  int mix = argc > 4 && strcmp(argv[3], "mix") == 0;
  if (mix) {
    void* rt = dlopen(argv[4], RTLD_NOW);
    rt_launch = rt ? (rt_launch_t)dlsym(rt, "cudaLaunchKernel") : NULL;
    if (!rt_launch) return 2;
  }
  int (*one)(long) = mix ? one_step : one_launch;
  long per = mix ? kStepLaunches : 1; /* launches a unit of the loop */
  for (int k = 0; k < 4; k++) {
    void* kernel = NULL;
    if (get_kernel(&kernel, &library, kNames[k]) || get_func(&funcs[k], kernel)) return 3;
  }
  volatile int sink = 0;
  const char* warm = getenv("LOOKUP_WARM_MS");
  double t0 = now(), warm_until = t0 + (warm ? atof(warm) / 1e3 : 0);
  long warmed = 0;
  for (; warm && now() < warm_until; warmed++) sink += one(warmed);
  t0 = now();
  for (long i = 0; i < n; i++) sink += one(i);
  double t1 = now();
  printf("{\"calls\": %ld, \"warm\": %ld, \"ns_per_call\": %.1f, \"ns_per_step\": %.1f}\n", n * per,
         warmed * per, (t1 - t0) * 1e9 / (double)(n * per), mix ? (t1 - t0) * 1e9 / n : 0.0);
  return sink == 0 ? 0 : 4;
}

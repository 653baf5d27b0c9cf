// Kernels with known names, launched a known number of times, for the kernel-name tests
// (tests/bpf/kernel_names_test.cc). Built by nvcc with -cudart shared: the real libcudart
// registers the kernels at start-up (__cudaRegisterFunction, from the module's constructor) and
// every <<<>>> launch enters cudaLaunchKernel, with or without a GPU (without one it fails at
// once, after the probes fired).
//
// Prints "pid N" and "ready", waits for a line on stdin, launches scale<float> 3 times,
// scale<double> 5, plain_add 7 and physics::step 2, prints "launched N" (N: the launches made)
// and waits for stdin to close before it exits, so the tracer reads its names while it lives.
// With `register-only`: no launch at all (the kernels are registered, nothing else is called).
// With `steps S`: instead, S training-like steps of 50 scale<float> and 50 plain_add launches
// in turn, a little host work between them, and a cudaDeviceSynchronize that ends each step.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

template <typename T>
__global__ void scale(T* x, T a, int n) {
  int i = int(threadIdx.x);
  if (i < n) x[i] *= a;
}

__global__ void plain_add(float* x, int n) {
  if (int(threadIdx.x) < n) x[threadIdx.x] += 1.0f;
}

namespace physics {
__global__ void step(double* v, int n) {
  if (int(threadIdx.x) < n) v[threadIdx.x] = 0.0;
}
}  // namespace physics

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("pid %d\nready\n", int(getpid()));
  char line[64];
  if (!std::fgets(line, sizeof line, stdin)) return 2;
  if (argc == 2 && std::strcmp(argv[1], "register-only") == 0) {  // the registrations alone
    std::printf("launched 0\n");
    while (std::fgets(line, sizeof line, stdin)) {
    }
    return 0;
  }
  int n = 0;
  if (argc == 3 && std::strcmp(argv[1], "steps") == 0) {
    for (int s = 0, steps = std::atoi(argv[2]); s < steps; ++s) {
      for (int k = 0; k < 50; ++k) {
        scale<float><<<1, 1>>>(nullptr, 2.0f, 1);
        plain_add<<<1, 1>>>(nullptr, 1);
        n += 2;
        volatile double work = 0;
        for (int j = 0; j < 500; ++j) work = work + j;
      }
      cudaDeviceSynchronize();
    }
    std::printf("launched %d (%s)\n", n, cudaGetErrorName(cudaGetLastError()));
    while (std::fgets(line, sizeof line, stdin)) {
    }
    return 0;
  }
  for (int i = 0; i < 3; ++i, ++n) scale<float><<<1, 1>>>(nullptr, 2.0f, 1);
  for (int i = 0; i < 5; ++i, ++n) scale<double><<<1, 1>>>(nullptr, 2.0, 1);
  for (int i = 0; i < 7; ++i, ++n) plain_add<<<1, 1>>>(nullptr, 1);
  for (int i = 0; i < 2; ++i, ++n) physics::step<<<1, 1>>>(nullptr, 1);
  std::printf("launched %d (%s)\n", n, cudaGetErrorName(cudaGetLastError()));
  while (std::fgets(line, sizeof line, stdin)) {
  }
  return 0;
}

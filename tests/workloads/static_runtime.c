/* Links the CUDA runtime statically (nvcc's default): no libcudart.so is mapped, the
 * functions live in this executable. 3 x cudaMalloc(512), 2 x cudaStreamSynchronize. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("pid %d\n", getpid());
  void* p;
  for (int i = 0; i < 3; i++) printf("cudaMalloc %d\n", cudaMalloc(&p, 512));
  for (int i = 0; i < 2; i++)
    printf("cudaStreamSynchronize %d\n", cudaStreamSynchronize((cudaStream_t)0x42));
  return 0;
}

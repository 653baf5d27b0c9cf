/* Native stacks: cudaMalloc through the real libcudart from alloc_weights(), itself called
 * from main(), at lines this program prints ("alloc_line N", "main_line M"). Built with -g and
 * frame pointers, so the stored stack must read alloc_weights at this file:N, then main at
 * this file:M. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <unistd.h>

#define CALLS 5

// The call and __LINE__ share a line: clang-format must leave them so.
// clang-format off
__attribute__((noinline)) static int alloc_weights(size_t bytes) {
  void* p = NULL;
  int rc = (int)cudaMalloc(&p, bytes); int line = __LINE__;
  static int printed = 0;
  if (!printed++) printf("alloc_line %d\n", line);
  return rc;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("pid %d\n", getpid());
  int rc = 0;
  for (int i = 0; i < CALLS; i++) {
    rc = alloc_weights((size_t)4096 * (i + 1)); int line = __LINE__;
    if (i == 0) printf("main_line %d\n", line);
  }
  // clang-format on
  printf("calls %d ret %d\n", CALLS, rc);
  /* The tracer reads a process's maps when its first call wakes it; on a saturated test host
   * that wake-up can lag the whole program. Staying a moment keeps the frames resolvable. */
  usleep(300 * 1000);
  return 0;
}

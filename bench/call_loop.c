/* Calls one function of a library in a tight loop and prints ns per call.
 *   call_loop LIB SYMBOL N            N calls, as fast as possible
 *   call_loop LIB SYMBOL N RATE       paced to RATE calls/s (bursts every 10 ms)
 * The symbol is called as int f(void*) with a non-null argument. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  int (*f)(void*) = (int (*)(void*))dlsym(h, argv[2]);
  if (!f) return 2;
  long n = atol(argv[3]);
  long rate = argc > 4 ? atol(argv[4]) : 0;
  if (getenv("CALL_LOOP_WAIT")) {
    printf("ready %d\n", getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof(line), stdin)) return 3;
  }
  volatile int sink = 0;
  double t0 = now();
  if (!rate) {
    for (long i = 0; i < n; i++) sink += f((void*)0x1);
  } else {
    long per_tick = rate / 100, done = 0;
    double next = t0;
    while (done < n) {
      for (long i = 0; i < per_tick && done < n; i++, done++) sink += f((void*)0x1);
      next += 0.01;
      double d = next - now();
      if (d > 0) usleep((useconds_t)(d * 1e6));
    }
  }
  double t1 = now();
  printf("{\"calls\": %ld, \"ns_per_call\": %.1f}\n", n, (t1 - t0) * 1e9 / n);
  return 0;
}

/* A planted noisy neighbour: burns one CPU for SECONDS, named NAME.
 *   cpu_hog CPU SECONDS [NAME [TICK_US [RUN_US]]]   (NAME defaults to noisy_neighbor)
 * With TICK_US it is a ticker instead, like a kworker woken by a timer: it runs RUN_US (default
 * 10 us), sleeps TICK_US, and again. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(atoi(argv[1]), &set);
  sched_setaffinity(0, sizeof(set), &set);
  prctl(PR_SET_NAME, argc > 3 ? argv[3] : "noisy_neighbor");
  printf("%s %d\n", argc > 4 ? "ticker" : "hog", getpid());
  fflush(stdout);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  volatile unsigned long x = 0;
  if (argc > 4) {
    struct timespec tick = {atol(argv[4]) / 1000000, (atol(argv[4]) % 1000000) * 1000};
    long run_ns = argc > 5 ? atol(argv[5]) * 1000 : 10000;
    do {
      struct timespec w;
      clock_gettime(CLOCK_MONOTONIC, &w);
      do {
        x += 1;
        clock_gettime(CLOCK_MONOTONIC, &t);
      } while ((t.tv_sec - w.tv_sec) * 1000000000L + (t.tv_nsec - w.tv_nsec) < run_ns);
      nanosleep(&tick, NULL);
    } while (t.tv_sec - t0.tv_sec < atol(argv[2]));
    return 0;
  }
  do {
    for (int i = 0; i < 100000; i++) x += (unsigned long)i;
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while (t.tv_sec - t0.tv_sec < atol(argv[2]));
  return 0;
}

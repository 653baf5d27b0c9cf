/* Context-switch cost: two processes on one CPU pass a byte back and forth over pipes, so
 * every pass is a wakeup and a switch. Prints {"ns_per_switch": N}.
 *   switch_pingpong ROUND_TRIPS [CPU]   (CPU defaults to the last one) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  long n = atol(argv[1]);
  int cpu = argc > 2 ? atoi(argv[2]) : (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set)) return perror("sched_setaffinity"), 1;
  int to_child[2], to_parent[2];
  if (pipe(to_child) || pipe(to_parent)) return perror("pipe"), 1;
  char c = 0;
  pid_t child = fork();
  if (child < 0) return perror("fork"), 1;
  if (child == 0) {
    for (long i = 0; i < n; i++)
      if (read(to_child[0], &c, 1) != 1 || write(to_parent[1], &c, 1) != 1) return 1;
    return 0;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; i++)
    if (write(to_child[1], &c, 1) != 1 || read(to_parent[0], &c, 1) != 1) return 1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int status = 0;
  waitpid(child, &status, 0);
  double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
  printf("{\"ns_per_switch\": %.1f}\n", ns / (2.0 * (double)n));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

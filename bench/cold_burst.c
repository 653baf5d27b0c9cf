/* What this host charges work that runs in bursts after idling, as a tracer's reader does: the
 * same appends into 25 columns of 4,096 rows (a call block's shape, store/column_block.h) done
 * back to back, then in bursts of BURST rows each after NAP_US of sleep. Prints one JSON line:
 * ns per row warm and in bursts, and their ratio (the host's cold factor).
 *
 * On a VM whose vCPU is descheduled while it idles, the caches and TLB a burst finds are cold:
 * this VM's factor was ~13x for bursts of 1,400 rows after 30 ms, which is why the tracer's
 * own CPU per call at a training step's call rate is several times what it is on a launch loop
 * that keeps its reader busy (docs/performance.md).
 *   cold_burst [BURST [NAP_US [BURSTS]]]      (defaults 1400, 30000, 40) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { kColumns = 25, kRows = 4096 };

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t* columns[kColumns];
static volatile int64_t sink;

/* Appends `rows` rows from row `first` on (wrapping at kRows), one value a column each. */
static void append_rows(int64_t first, int rows) {
  int64_t acc = 0;
  for (int i = 0; i < rows; i++) {
    int64_t row = (first + i) % kRows;
    for (int c = 0; c < kColumns; c++) columns[c][row] = first + i + c;
    acc += columns[i % kColumns][row];
  }
  sink += acc;
}

static double ns_per_row(int burst, long nap_us, int bursts) {
  int64_t spent = 0, first = 0;
  for (int b = 0; b < bursts; b++) {
    if (nap_us) usleep((useconds_t)nap_us);
    int64_t t0 = now_ns();
    append_rows(first, burst);
    spent += now_ns() - t0;
    first += burst;
  }
  return (double)spent / ((double)burst * bursts);
}

int main(int argc, char** argv) {
  int burst = argc > 1 ? atoi(argv[1]) : 1400;
  long nap_us = argc > 2 ? atol(argv[2]) : 30000;
  int bursts = argc > 3 ? atoi(argv[3]) : 40;
  if (burst < 1 || nap_us < 0 || bursts < 1) {
    fprintf(stderr, "usage: cold_burst [BURST [NAP_US [BURSTS]]]\n");
    return 2;
  }
  for (int c = 0; c < kColumns; c++) {
    columns[c] = calloc(kRows, sizeof(int64_t));
    if (!columns[c]) return 1;
  }
  append_rows(0, kRows); /* faulted in once */
  double warm = ns_per_row(burst, 0, bursts);
  double cold = ns_per_row(burst, nap_us, bursts);
  printf("{\"burst_rows\": %d, \"nap_us\": %ld, \"warm_ns_per_row\": %.1f, "
         "\"burst_ns_per_row\": %.1f, \"cold_factor\": %.1f}\n",
         burst, nap_us, warm, cold, cold / warm);
  return 0;
}

/* TEST ONLY: LD_PRELOAD'ed into the tracer to step its wall clock while it traces, as NTP or a
 * VM resumed from a snapshot does: once the file CLOCK_STEP_FILE exists, CLOCK_REALTIME (and
 * gettimeofday/time) reads CLOCK_STEP_NS nanoseconds later (negative: earlier).
 * CLOCK_MONOTONIC is untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int (*real_clock_gettime)(clockid_t, struct timespec*);

static long long step_ns(void) {
  static int stepped;
  if (stepped) return atoll(getenv("CLOCK_STEP_NS"));
  const char* f = getenv("CLOCK_STEP_FILE");
  const char* n = getenv("CLOCK_STEP_NS");
  if (!f || !n || access(f, F_OK) != 0) return 0;
  stepped = 1;
  return atoll(n);
}

static void shift(struct timespec* ts, long long ns) {
  long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + ns;
  ts->tv_sec = (time_t)(t / 1000000000LL);
  ts->tv_nsec = (long)(t % 1000000000LL);
}

int clock_gettime(clockid_t c, struct timespec* ts) {
  if (!real_clock_gettime)
    real_clock_gettime = (int (*)(clockid_t, struct timespec*))dlsym(RTLD_NEXT, "clock_gettime");
  int r = real_clock_gettime(c, ts);
  if (r == 0 && (c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE)) shift(ts, step_ns());
  return r;
}

int gettimeofday(struct timeval* tv, void* tz) {
  struct timespec ts;
  int r = clock_gettime(CLOCK_REALTIME, &ts);
  (void)tz;
  if (r == 0) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return r;
}

time_t time(time_t* t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (t) *t = ts.tv_sec;
  return ts.tv_sec;
}

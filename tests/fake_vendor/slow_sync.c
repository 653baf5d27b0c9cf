/* TEST ONLY: LD_PRELOAD'ed into the tracer to make its disk slow: every fsync and fdatasync
 * sleeps SLOW_SYNC_US microseconds (default 30,000) before it syncs. A slow disk slows the
 * checkpoints and retention passes, and the reader falls behind the rings, so one drain of
 * them brings more than a tick's worth of calls: what --max-db-size must hold against. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static void slow_down(void) {
  const char* e = getenv("SLOW_SYNC_US");
  usleep(e ? (useconds_t)atoi(e) : 30000);
}

int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  slow_down();
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  slow_down();
  return real(fd);
}

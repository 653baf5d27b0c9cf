/* A process hung in a sync: it loads the stand-in runtime (argv[1]) and calls
 * cudaStreamSynchronize(0xabc) from wait_for_device(), itself called from main(); with
 * INGERO_FAKE_SYNC_FD=0 the sync blocks until a byte arrives on stdin (tests/bpf/hangs_test.cc).
 * Prints "pid N", "entering" just before the call and "returned R" after it. Built with -g and
 * frame pointers: the hung call's stack must read wait_for_device at the line marked
 * HUNG_SYNC_CALL, then main at the line marked HUNG_SYNC_MAIN (the test finds both in this
 * file). A second thread sleeps, so the
 * process has another thread to report. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*sync_t)(void*);
static sync_t sync_fn;

static void* sleeper(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

__attribute__((noinline)) static int wait_for_device(void) {
  printf("entering\n");
  int rc = sync_fn((void*)0xabc);  // HUNG_SYNC_CALL
  return rc;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) return 2;
  sync_fn = (sync_t)dlsym(lib, "cudaStreamSynchronize");
  if (!sync_fn) return 2;
  pthread_t t;
  pthread_create(&t, NULL, sleeper, NULL);
  printf("pid %d\n", getpid());
  if (argc > 2) usleep((useconds_t)atoi(argv[2]) * 1000);  // the tracer attaches meanwhile
  int rc = wait_for_device();                              // HUNG_SYNC_MAIN
  printf("returned %d\n", rc);
  return 0;
}

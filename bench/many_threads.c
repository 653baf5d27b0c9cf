/* 1,000 threads (argv[2]) that made a traced call, for bench/inflight_cost.sh: each calls the
 * runtime at argv[1] once, then either sleeps (`idle`: in the tracer's thread table, outside any
 * call) or calls cudaStreamSynchronize, which blocks with INGERO_FAKE_SYNC_FD set on a pipe
 * nobody writes (`stuck`: every thread inside a call). Prints "pid N" and "ready" once every
 * thread is where it stays; exits when stdin closes.
 *   many_threads LIB N idle|stuck */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*malloc_t)(void**, size_t);
typedef int (*sync_t)(void*);
static malloc_t malloc_fn;
static sync_t sync_fn;
static int stuck;
static pthread_barrier_t ready;

static void* worker(void* arg) {
  (void)arg;
  void* p;
  malloc_fn(&p, 4096);
  pthread_barrier_wait(&ready);
  if (stuck) sync_fn((void*)0xabc);
  for (;;) pause();
  return NULL;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 4) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) return 2;
  malloc_fn = (malloc_t)dlsym(lib, "cudaMalloc");
  sync_fn = (sync_t)dlsym(lib, "cudaStreamSynchronize");
  if (!malloc_fn || !sync_fn) return 2;
  int n = atoi(argv[2]);
  stuck = strcmp(argv[3], "stuck") == 0;
  printf("pid %d\n", getpid());
  /* Start only once the tracer is attached (a line on stdin). */
  char go[8];
  if (!fgets(go, sizeof(go), stdin)) return 1;
  pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 64 * 1024);
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, &a, worker, NULL) != 0) return 3;
  }
  pthread_barrier_wait(&ready);
  printf("ready\n");
  while (fgets(go, sizeof(go), stdin)) {
  }
  return 0;
}

/* A data-parallel job whose collective hangs (tests/fleet/fleet_hang_test.cc): one process per
 * rank given, each on the stand-in NCCL (tests/fake_vendor/fake_nccl.c, whose ncclAllReduce
 * waits for every rank). Every rank inits the communicator and runs ncclAllReduce STEPS - 1
 * times; at step STEPS all but HANG_RANK call it again and wait there for ever, while
 * HANG_RANK never does: it sleeps in wait_for_input() (the rank stuck elsewhere: in its data
 * loader, a deadlock of its own).
 *
 *   hang_ranks LIBNCCL BARRIER_FILE NRANKS RANKS STEPS HANG_RANK
 * (FAKE_NCCL_BARRIER is set to BARRIER_FILE for the library.) Prints "rank R pid P" at
 * start, "rank R entering STEPS" just before the last collective, and "rank R waiting" just
 * before HANG_RANK's sleep. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char internal[128];
} ncclUniqueId;
typedef int (*init_fn)(void**, int, ncclUniqueId, int);
typedef int (*allreduce_fn)(const void*, void*, size_t, int, int, void*, void*);

__attribute__((noinline)) static void wait_for_input(void) {
  for (;;) pause(); /* HANG_RANK_WAIT */
}

static int run_rank(const char* lib, int nranks, int rank, int steps, int hang_rank) {
  prctl(PR_SET_PDEATHSIG, 9);
  void* h = dlopen(lib, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
    return 1;
  }
  init_fn init = (init_fn)dlsym(h, "ncclCommInitRank");
  allreduce_fn allreduce = (allreduce_fn)dlsym(h, "ncclAllReduce");
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, "ingero-hang-test", 16);
  void* comm = NULL;
  if (init(&comm, nranks, id, rank) != 0) {
    fprintf(stderr, "rank %d: ncclCommInitRank failed\n", rank);
    return 1;
  }
  float buf[16] = {0};
  for (int step = 1; step < steps; ++step)
    allreduce(buf, buf, 16, 7 /* ncclFloat32 */, 0 /* ncclSum */, comm, (void*)0xabc);
  if (rank == hang_rank) {
    printf("rank %d waiting\n", rank);
    fflush(stdout);
    wait_for_input();
  }
  printf("rank %d entering %d\n", rank, steps);
  fflush(stdout);
  allreduce(buf, buf, 16, 7, 0, comm, (void*)0xabc); /* HANG_RANKS_CALL */
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: hang_ranks LIBNCCL BARRIER_FILE NRANKS RANKS STEPS HANG_RANK\n");
    return 2;
  }
  setenv("FAKE_NCCL_BARRIER", argv[2], 1);
  int nranks = atoi(argv[3]), steps = atoi(argv[5]), hang_rank = atoi(argv[6]);
  char* ranks = strdup(argv[4]);
  int children = 0;
  for (char* tok = strtok(ranks, ","); tok; tok = strtok(NULL, ",")) {
    int rank = atoi(tok);
    pid_t pid = fork();
    if (pid == 0) _exit(run_rank(argv[1], nranks, rank, steps, hang_rank));
    printf("rank %d pid %d\n", rank, (int)pid);
    fflush(stdout);
    ++children;
  }
  int failed = 0;
  for (int i = 0; i < children; ++i) {
    int status = 0;
    wait(&status);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  return failed;
}

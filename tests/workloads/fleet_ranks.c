/* A data-parallel job of NRANKS ranks on the real libnccl and libcudart, spread over several
 * traced "nodes": this process forks one process per rank it is given. There is no GPU, so the
 * communicator cannot be created and every call fails, but every call enters the library:
 * ncclCommInitRank carries the (fabricated, shared) unique id and the rank, ncclAllReduce its
 * count and datatype. The ranks synchronise for real through a futex barrier in a shared file,
 * which is what a collective does: nobody leaves it before the last rank arrived.
 *
 *   fleet_ranks BARRIER_FILE NRANKS RANKS STEPS WORK_US LIBNCCL LIBCUDART [CPU]
 *     RANKS    comma-separated ranks to run here ("0,1")
 *     STEPS    steps to run, or "30s": rank 0 stops the job after 30 s (every rank stops at
 *              the same step)
 *     WORK_US  CPU time each rank burns per step before the collective (its "compute")
 *     CPU      pin the ranks to this CPU (a CPU hog there delays them)
 * Per step each rank: burn WORK_US of CPU, ncclAllReduce, barrier (the collective completes
 * when the last rank arrives), cudaStreamSynchronize (the host sees the completion), and a
 * second barrier, so that on a shared core no rank's next compute delays a peer's view of the
 * completion. Prints "rank R pid P" at start, then "rank R arrivals T0,T1,..." (CLOCK_REALTIME
 * ns at each ncclAllReduce: the truth a skewed tracer clock is checked against) and
 * "rank R done STEPS" at the end. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  char internal[128];
} ncclUniqueId;

struct barrier {
  _Atomic uint32_t count;
  _Atomic uint32_t gen;
};

struct shared {
  struct barrier b[2];
  _Atomic int stop; /* set by rank 0 before the second barrier: read after it */
};

static void futex(_Atomic uint32_t* addr, int op, uint32_t val) {
  syscall(SYS_futex, (uint32_t*)addr, op, val, NULL, NULL, 0);
}

/* Sense by generation: the last arrival resets the count and bumps the generation. */
static void barrier_wait(struct barrier* b, uint32_t n) {
  uint32_t gen = atomic_load(&b->gen);
  if (atomic_fetch_add(&b->count, 1) + 1 == n) {
    atomic_store(&b->count, 0);
    atomic_fetch_add(&b->gen, 1);
    futex(&b->gen, FUTEX_WAKE, INT32_MAX);
    return;
  }
  while (atomic_load(&b->gen) == gen) futex(&b->gen, FUTEX_WAIT, gen);
}

static int64_t wall_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Burns `us` of this thread's CPU time: preemption stretches it in wall time. */
static void work(long us) {
  int64_t end = cpu_ns() + (int64_t)us * 1000;
  volatile unsigned long x = 0;
  while (cpu_ns() < end)
    for (int i = 0; i < 2000; i++) x += (unsigned long)i;
}

static int run_rank(struct shared* sh, int nranks, int rank, int steps, int seconds, long work_us,
                    const char* nccl, const char* cudart) {
  void* hn = dlopen(nccl, RTLD_NOW);
  void* hc = dlopen(cudart, RTLD_NOW);
  if (!hn || !hc) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  int (*init)(void**, int, ncclUniqueId, int) = dlsym(hn, "ncclCommInitRank");
  int (*allreduce)(const void*, void*, size_t, int, int, void*, void*) = dlsym(hn, "ncclAllReduce");
  int (*sync)(void*) = dlsym(hc, "cudaStreamSynchronize");
  if (!init || !allreduce || !sync) return 3;
  char name[16];
  snprintf(name, sizeof(name), "rank%d", rank);
  prctl(PR_SET_NAME, name);
  printf("rank %d pid %d\n", rank, getpid());
  ncclUniqueId id;
  for (int i = 0; i < 128; i++) id.internal[i] = (char)(i * 13 + 5); /* shared by all ranks */
  void* comm = NULL;
  init(&comm, nranks, id, rank);
  size_t cap = 1024;
  int64_t* arrivals = malloc(cap * sizeof(int64_t));
  int64_t until = wall_ns() + (int64_t)seconds * 1000000000;
  int s = 0;
  for (; seconds ? !atomic_load(&sh->stop) : s < steps; s++) {
    work(work_us);
    if ((size_t)s == cap) arrivals = realloc(arrivals, (cap *= 2) * sizeof(int64_t));
    arrivals[s] = wall_ns();
    allreduce((void*)0x1000, (void*)0x2000, 1 << 20, 7 /* float32 */, 0 /* sum */, comm,
              (void*)0x5a);
    barrier_wait(&sh->b[0], (uint32_t)nranks);
    sync((void*)0x5a);
    if (seconds && rank == 0 && wall_ns() >= until) atomic_store(&sh->stop, 1);
    barrier_wait(&sh->b[1], (uint32_t)nranks);
  }
  steps = s;
  printf("rank %d arrivals ", rank);
  for (int s = 0; s < steps; s++) printf("%s%lld", s ? "," : "", (long long)arrivals[s]);
  printf("\nrank %d done %d\n", rank, steps);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 8) {
    fprintf(stderr,
            "usage: fleet_ranks BARRIER_FILE NRANKS RANKS STEPS WORK_US LIBNCCL LIBCUDART [CPU]\n");
    return 2;
  }
  int fd = open(argv[1], O_RDWR);
  if (fd < 0 || ftruncate(fd, 4096) != 0) {
    perror(argv[1]);
    return 2;
  }
  struct shared* sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (sh == MAP_FAILED) return 2;
  if (argc > 8) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(argv[8]), &set);
    sched_setaffinity(0, sizeof(set), &set);
  }
  int nranks = atoi(argv[2]), steps = atoi(argv[4]);
  int seconds = argv[4][strlen(argv[4]) - 1] == 's' ? steps : 0;
  long work_us = atol(argv[5]);
  char* ranks = strdup(argv[3]);
  int children = 0;
  for (char* tok = strtok(ranks, ","); tok; tok = strtok(NULL, ",")) {
    int rank = atoi(tok);
    pid_t pid = fork();
    if (pid == 0) _exit(run_rank(sh, nranks, rank, steps, seconds, work_us, argv[6], argv[7]));
    if (pid > 0) children++;
  }
  int rc = 0, status;
  while (children-- > 0)
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  return rc;
}

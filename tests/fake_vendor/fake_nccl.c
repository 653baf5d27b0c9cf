/* A stand-in libnccl.so.2 whose collectives really wait for every rank (tests/fleet: a planted
 * collective hang). Ranks of one communicator share a futex barrier in the file named by
 * FAKE_NCCL_BARRIER (4 KiB of zeros, created by the test): ncclAllReduce returns when all
 * nranks ranks have entered it, so a rank that never calls it leaves its peers inside, as a
 * real NCCL would. The unique id, rank and communicator pass through the real signatures: the
 * 128-byte ncclUniqueId by value, the communicator written through the output pointer. The
 * other entry points exist (the backend's probe table names them) and do nothing. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
  char internal[128];
} ncclUniqueId;

struct barrier {
  _Atomic uint32_t count;
  _Atomic uint32_t gen;
};

struct comm {
  int nranks, rank;
  struct barrier* b;
};

static void futex(_Atomic uint32_t* addr, int op, uint32_t val) {
  syscall(SYS_futex, (uint32_t*)addr, op, val, NULL, NULL, 0);
}

int ncclCommInitRank(struct comm** out, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  const char* path = getenv("FAKE_NCCL_BARRIER");
  int fd = path ? open(path, O_RDWR) : -1;
  if (fd < 0) return 2; /* ncclSystemError */
  void* p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return 2;
  struct comm* c = malloc(sizeof(*c));
  c->nranks = nranks;
  c->rank = rank;
  c->b = p;
  *out = c;
  return 0;
}

int ncclAllReduce(const void* send, void* recv, size_t count, int datatype, int op, struct comm* c,
                  void* stream) {
  (void)send, (void)recv, (void)count, (void)datatype, (void)op, (void)stream;
  struct barrier* b = c->b;
  uint32_t gen = atomic_load(&b->gen);
  if (atomic_fetch_add(&b->count, 1) + 1 == (uint32_t)c->nranks) {
    atomic_store(&b->count, 0);
    atomic_fetch_add(&b->gen, 1);
    futex(&b->gen, FUTEX_WAKE, INT32_MAX);
    return 0;
  }
  while (atomic_load(&b->gen) == gen) futex(&b->gen, FUTEX_WAIT, gen);
  return 0;
}

/* The stubs keep the real parameter lists (as documentation) and use none of them. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define NOTHING(name, ...) \
  int name(__VA_ARGS__) { return 0; }
NOTHING(ncclCommInitAll, void* comms, int ndev, const int* devlist)
NOTHING(ncclCommDestroy, void* comm)
NOTHING(ncclCommAbort, void* comm)
NOTHING(ncclAllGather, const void* s, void* r, size_t n, int t, void* comm, void* stream)
NOTHING(ncclReduceScatter, const void* s, void* r, size_t n, int t, int op, void* comm, void* st)
NOTHING(ncclBroadcast, const void* s, void* r, size_t n, int t, int root, void* comm, void* st)
NOTHING(ncclBcast, void* buf, size_t n, int t, int root, void* comm, void* stream)
NOTHING(ncclReduce, const void* s, void* r, size_t n, int t, int op, int root, void* c, void* st)
NOTHING(ncclSend, const void* s, size_t n, int t, int peer, void* comm, void* stream)
NOTHING(ncclRecv, void* r, size_t n, int t, int peer, void* comm, void* stream)
NOTHING(ncclGroupStart, void)
NOTHING(ncclGroupEnd, void)

/* Known NCCL traffic through the real libnccl (dlopen). Without a GPU the communicator
 * cannot be created and collectives on a NULL communicator are rejected, but every call
 * enters the library with real arguments: counts, datatypes, ops, the 7th (stack) argument,
 * and the 128-byte ncclUniqueId passed by value.
 * Prints "pid N", "id <hex of the 128 id bytes>" and "<op> <tid> <ret>" per call.
 * With a second argument `alltoall`: 4 all-to-all calls instead, by the library's own spelling
 * of the name (NCCL's ncclAlltoAll, RCCL's ncclAllToAll), and nothing else. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
  char internal[128];
} ncclUniqueId;
#define LOG(op, r) printf("%s %ld %d\n", op, (long)syscall(SYS_gettid), (int)(r))

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  void* h = dlopen(argc > 1 ? argv[1] : "libnccl.so.2", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  printf("pid %d\n", getpid());
  int (*init)(void**, int, ncclUniqueId, int) = dlsym(h, "ncclCommInitRank");
  int (*allreduce)(const void*, void*, size_t, int, int, void*, void*) = dlsym(h, "ncclAllReduce");
  int (*allgather)(const void*, void*, size_t, int, void*, void*) = dlsym(h, "ncclAllGather");
  int (*bcast)(const void*, void*, size_t, int, int, void*, void*) = dlsym(h, "ncclBroadcast");
  int (*bcast_alias)(void*, size_t, int, int, void*, void*) = dlsym(h, "ncclBcast");
  int (*reduce)(const void*, void*, size_t, int, int, int, void*, void*) = dlsym(h, "ncclReduce");
  int (*send)(const void*, size_t, int, int, void*, void*) = dlsym(h, "ncclSend");
  int (*recv)(void*, size_t, int, int, void*, void*) = dlsym(h, "ncclRecv");
  int (*gstart)(void) = dlsym(h, "ncclGroupStart");
  int (*gend)(void) = dlsym(h, "ncclGroupEnd");
  if (argc > 2 && strcmp(argv[2], "alltoall") == 0) {
    const char* name = "ncclAlltoAll";
    int (*a2a)(const void*, void*, size_t, int, void*, void*) = dlsym(h, name);
    if (!a2a) a2a = dlsym(h, name = "ncclAllToAll");
    if (!a2a) {
      fprintf(stderr, "no all-to-all in %s\n", argv[1]);
      return 2;
    }
    for (int i = 0; i < 4; i++)
      LOG(name, a2a((void*)0x1000, (void*)0x2000, 77, 2 /* int32 */, NULL, (void*)0x57ab));
    return 0;
  }
  ncclUniqueId id;
  for (int i = 0; i < 128; i++) id.internal[i] = (char)(i * 7 + 3);
  printf("id ");
  for (int i = 0; i < 128; i++) printf("%02x", (unsigned char)id.internal[i]);
  printf("\n");
  void* comm = NULL;
  LOG("ncclCommInitRank", init(&comm, 4, id, 2));
  for (int i = 0; i < 3; i++)
    LOG("ncclAllReduce", allreduce((void*)0x1000, (void*)0x2000, 262144, 7 /* float32 */,
                                   0 /* sum */, NULL, (void*)0x57a7));
  LOG("ncclAllGather",
      allgather((void*)0x1000, (void*)0x2000, 1024, 9 /* bfloat16 */, NULL, (void*)0x57a7));
  LOG("ncclBroadcast",
      bcast((void*)0x1000, (void*)0x2000, 4096, 4 /* int64 */, 1, NULL, (void*)0x57a8));
  // The in-place alias calls ncclBroadcast: one collective each, not two.
  for (int i = 0; i < 2; i++)
    LOG("ncclBcast", bcast_alias((void*)0x1000, 2048, 4 /* int64 */, 0, NULL, (void*)0x57a8));
  LOG("ncclReduce", reduce((void*)0x1000, (void*)0x2000, 100, 8 /* float64 */, 2 /* max */, 3, NULL,
                           (void*)0x57a9));
  LOG("ncclGroupStart", gstart());
  LOG("ncclSend", send((void*)0x1000, 512, 0 /* int8 */, 1, NULL, (void*)0x57aa));
  LOG("ncclRecv", recv((void*)0x2000, 512, 0, 3, NULL, (void*)0x57aa));
  LOG("ncclGroupEnd", gend());
  return 0;
}

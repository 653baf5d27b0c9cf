/* A stand-in CPython 3.11 for the layout-verification tests. Built as ".../python3.11" with
 * -rdynamic, it exports what ingero looks for (_PyRuntime, Py_Version, PyCode_Type,
 * PyUnicode_Type, PyBytes_Type) and lays out the interpreter -> thread state chain at the
 * offsets given on the command line. "patched" makes the thread state point at some other
 * interpreter, the way a distro build with a different struct layout reads: ingero must
 * report it unverified and produce no Python frame. "clean" makes it point back. "linking"
 * leaves the thread state's interpreter unset, as a reader racing the interpreter's start
 * could see it: not yet verifiable, and no reason to refuse. The chain is written in
 * CPython's order (thread state first, the runtime's head last), so a reader that sees the
 * head sees the rest.
 *
 *   python3.11 patched|clean|linking RUNTIME_INTERP_HEAD INTERP_THREADS_HEAD TSTATE_INTERP
 *              [LIB N]
 *
 * With LIB, calls LIB's cudaMalloc N times (printing "pid P" first and "calls N" after),
 * then waits for stdin to close; without, prints "ready" and waits for a line on stdin. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((used, aligned(64))) char _PyRuntime[8192];
__attribute__((used)) const unsigned long Py_Version = 0x030b04f0; /* 3.11.4 final */
__attribute__((used)) char PyCode_Type[512];
__attribute__((used)) char PyUnicode_Type[512];
__attribute__((used)) char PyBytes_Type[512];

static char interp[8192] __attribute__((aligned(64)));
static char other_interp[8192] __attribute__((aligned(64)));
static char tstate[8192] __attribute__((aligned(64)));

static void put(char* base, unsigned long off, void* value) {
  if (off + sizeof value > 8192) {
    fprintf(stderr, "offset %lu too large\n", off);
    exit(2);
  }
  memcpy(base + off, &value, sizeof value);
}

typedef int (*malloc_fn)(void**, size_t);

__attribute__((noinline)) static int call_lib(malloc_fn f, size_t bytes) {
  void* p = NULL;
  return f(&p, bytes);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s patched|clean|linking RIH ITH TI [LIB N]\n", argv[0]);
    return 2;
  }
  int patched = strcmp(argv[1], "patched") == 0;
  if (strcmp(argv[1], "linking") != 0)
    put(tstate, strtoul(argv[4], NULL, 0), patched ? other_interp : interp);
  put(interp, strtoul(argv[3], NULL, 0), tstate);
  put(_PyRuntime, strtoul(argv[2], NULL, 0), interp);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 7) {
    printf("ready\n");
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 0;
    return 0;
  }
  void* h = dlopen(argv[5], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", argv[5], dlerror());
    return 1;
  }
  malloc_fn f = (malloc_fn)dlsym(h, "cudaMalloc");
  if (!f) return 1;
  printf("pid %d\n", getpid());
  int n = atoi(argv[6]), rc = 0;
  for (int i = 0; i < n; i++) rc = call_lib(f, 4096);
  printf("calls %d ret %d\n", n, rc);
  /* Stay alive until stdin closes, so a test decides when the process is gone. */
  char buf[64];
  while (fread(buf, 1, sizeof buf, stdin) > 0) {
  }
  return 0;
}

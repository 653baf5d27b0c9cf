/* Driver-API kernels for the kernel-name tests (tests/bpf/kernel_names_test.cc): a module's
 * functions looked up by name with cuModuleGetFunction, then launched with cuLaunchKernel,
 * through the libcuda given as argv[1] (the stand-in, tests/fake_vendor/fake_cuda.c).
 *
 * Prints "pid N" and "ready", waits for a line on stdin, then: looks up "vector_add" and
 * "_ZN6matmul4tileILi16EEEvPfS1_" (names in this program's file) and "_Z9reduce_v2Pfi" (a
 * copy on the heap), and "missing_kernel" (the driver fails it); launches vector_add 4 times,
 * the matmul tile 6, reduce_v2 once and a handle never looked up (0xbeef) twice; asks
 * cuFuncGetName of vector_add; prints "launched" and waits for stdin to close.
 *
 * `driver_kernels LIB repeat N PAUSE_MS`, as cuDNN launches: two batches PAUSE_MS apart, each of
 * N rounds of a look-up of vector_add, its name asked, a look-up of "missing_kernel" that fails
 * (its output keeps the handle it held) and a launch.
 *
 * `driver_kernels LIB rest M [once|child]`, as cuDNN launches: every 100 us until a line comes,
 * a look-up of vector_add, its name asked and a launch; prints "looked up N" (N: those rounds);
 * M rounds more at once; then, every 2 ms until the next line, a look-up of "_Z9reduce_v2Pfi" (a
 * kernel new to it; with `once`, only before the first) and a launch of it; prints "launched K"
 * (K: those launches) and waits for stdin to close. With `child`, instead of that, runs
 * `driver_kernels LIB newcomer` and waits for it, prints "child done" and waits for stdin to
 * close: that one opens LIB, prints "child ready", waits for a line, looks "_Z9reduce_v2Pfi" up
 * once and launches it 3 times, prints "child launched 3" and exits. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*load_t)(void**, const void*);
typedef int (*get_t)(void**, void*, const char*);
typedef int (*name_t)(const char**, void*);
typedef int (*launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        void*, void**, void**);

/* vector_add looked up, its name asked, and launched: 0, or the failure. */
static int look_up_and_launch(get_t get, name_t name, launch_t launch, void* mod) {
  void* f = NULL;
  const char* asked = NULL;
  if (get(&f, mod, "vector_add") || name(&asked, f)) return 1;
  launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
  load_t load = (load_t)dlsym(h, "cuModuleLoadData");
  get_t get = (get_t)dlsym(h, "cuModuleGetFunction");
  name_t name = (name_t)dlsym(h, "cuFuncGetName");
  launch_t launch = (launch_t)dlsym(h, "cuLaunchKernel");
  if (!load || !get || !name || !launch) return 2;
  char line[64];
  if (argc >= 3 && strcmp(argv[2], "newcomer") == 0) {
    printf("child ready\n");
    void *mod = NULL, *f = NULL;
    static const char image[] = "fatbin";
    if (!fgets(line, sizeof line, stdin)) return 2;
    if (load(&mod, image) || get(&f, mod, "_Z9reduce_v2Pfi")) return 4;
    for (int i = 0; i < 3; i++) launch(f, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL);
    printf("child launched 3\n");
    return 0;
  }
  printf("pid %d\nready\n", (int)getpid());
  if (!fgets(line, sizeof line, stdin)) return 2;
  void* mod = NULL;
  static const char image[] = "fatbin";
  if (load(&mod, image) != 0) return 3;
  if (argc >= 4 && strcmp(argv[2], "rest") == 0) {
    long rounds = 0, more = atol(argv[3]), launched = 0;
    struct pollfd in = {.fd = 0, .events = POLLIN};
    while (poll(&in, 1, 0) == 0) {
      if (look_up_and_launch(get, name, launch, mod)) return 4;
      rounds++;
      usleep(100);
    }
    if (!fgets(line, sizeof line, stdin)) return 2;
    printf("looked up %ld\n", rounds);
    for (long i = 0; i < more; i++)
      if (look_up_and_launch(get, name, launch, mod)) return 4;
    if (argc >= 5 && strcmp(argv[4], "child") == 0) {
      pid_t child = fork();
      if (child == 0) {
        execl(argv[0], argv[0], argv[1], "newcomer", (char*)NULL);
        _exit(127);
      }
      int status = 0;
      if (child < 0 || waitpid(child, &status, 0) != child || status != 0) return 6;
      printf("child done\n");
      while (fgets(line, sizeof line, stdin)) {
      }
      return 0;
    }
    int once = argc >= 5 && strcmp(argv[4], "once") == 0;
    void* f = NULL;
    while (poll(&in, 1, 0) == 0) {
      if ((!once || !f) && get(&f, mod, "_Z9reduce_v2Pfi")) return 4;
      launch(f, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL);
      launched++;
      usleep(2000);
    }
    printf("launched %ld\n", launched);
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
  }
  if (argc >= 5 && strcmp(argv[2], "repeat") == 0) {
    int rounds = atoi(argv[3]);
    for (int batch = 0; batch < 2; batch++) {
      if (batch) usleep((useconds_t)atoi(argv[4]) * 1000);
      for (int i = 0; i < rounds; i++) {
        void* f = NULL;
        const char* asked = NULL;
        if (get(&f, mod, "vector_add") || name(&asked, f)) return 4;
        if (get(&f, mod, "missing_kernel") == 0) return 5;
        launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
      }
    }
    printf("launched\n");
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
  }
  void *add = NULL, *tile = NULL, *reduce = NULL, *missing = NULL;
  char* heap_name = strdup("_Z9reduce_v2Pfi");
  if (get(&add, mod, "vector_add") || get(&tile, mod, "_ZN6matmul4tileILi16EEEvPfS1_") ||
      get(&reduce, mod, heap_name))
    return 4;
  if (get(&missing, mod, "missing_kernel") == 0) return 5;
  for (int i = 0; i < 4; i++) launch(add, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
  for (int i = 0; i < 6; i++) launch(tile, 2, 2, 1, 16, 16, 1, 0, NULL, NULL, NULL);
  launch(reduce, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL);
  for (int i = 0; i < 2; i++) launch((void*)0xbeef, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
  const char* asked = NULL;
  if (name(&asked, add) || strcmp(asked, "vector_add") != 0) return 6;
  printf("launched\n");
  while (fgets(line, sizeof line, stdin)) {
  }
  free(heap_name);
  return 0;
}

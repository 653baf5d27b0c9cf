/* Drives the fake runtime (tests/fake_vendor) loaded with dlopen from argv[2].
 *   fake_calls threads PATH NTHREADS NCALLS  each thread: NCALLS cudaMalloc(4096*(i+1)),
 *                                            then one cudaDeviceSynchronize (nests a driver call)
 *   fake_calls exit-midcall PATH             a thread blocks in cudaStreamSynchronize; the
 *                                            process exits while it is in flight
 *   fake_calls late PATH                     load, print "loaded", wait for a line on stdin,
 *                                            then 5 x cudaMalloc(1 MiB)
 *   fake_calls unload PATH                   3 calls, dlclose, dlopen again, 2 calls
 *   fake_calls steps PATH N [CPU [API]]      N training steps: 16 launches then one stream
 *                                            sync (set INGERO_FAKE_SYNC_SPIN_US to make the sync
 *                                            spin); pinned to CPU if given; API cuda (default)
 *                                            or hip selects the function names; with
 *                                            INGERO_FAKE_GATE=P, each quarter K>0 starts once
 *                                            the file P.K exists (a test paces the run)
 *   fake_calls launches PATH N M [GAP]       N cudaLaunchKernel (each nests the driver's
 *                                            cuLaunchKernel; GAP µs apart), then M direct
 *                                            cuLaunchKernel calls from the program, as cuBLAS
 *                                            makes them
 *   fake_calls detach PATH N GATE            a thread enters cudaStreamSynchronize (blocked on a
 *                                            pipe); the main thread makes N cudaLaunchKernel,
 *                                            prints "launched", waits for the file GATE.1, lets
 *                                            the sync return, after which its thread makes 5
 *                                            cudaMalloc; then 10 more launches
 *   fake_calls detach-launch PATH N GATE     the same, but the thread's call in flight is a
 *                                            cudaLaunchKernel (blocked on a pipe before it
 *                                            reaches the driver); then 5 cudaMalloc
 *   fake_calls after-direct PATH N GATE      N cudaLaunchKernel, "launched", waits for the file
 *                                            GATE.1; then 4 times: a direct cuLaunchKernel from
 *                                            the program, 250 ms asleep (the tracer's read
 *                                            cycles end meanwhile), one cudaLaunchKernel
 *   fake_calls between-direct PATH N GATE    the same, but 1,000 times a direct cuLaunchKernel
 *                                            and at once two cudaLaunchKernel (read in the same
 *                                            cycle, as ResNet-18's after cuDNN's launches)
 *   fake_calls wake PATH N                   one cudaMalloc, then the main thread reads a pipe N
 *                                            times; a thread named "waker" writes each byte
 *                                            once the reader is asleep in its read (so every
 *                                            read blocks and is woken by it), then exits
 *                                            unjoined
 *   fake_calls wake-late PATH                a thread "sleeper" blocks in a read of a pipe
 *                                            before the process makes any call; once it is
 *                                            asleep the main thread makes one cudaMalloc (the
 *                                            process is a GPU process from then on), then
 *                                            wakes it with a byte, and joins it
 *   fake_calls main-exits PATH               2 cudaMalloc, then the main thread ends with
 *                                            pthread_exit while a worker, 300 ms later, makes 8
 *                                            cudaMalloc and ends the process with exit(7)
 *   fake_calls exec-child PATH GATE EXE      one cudaMalloc; a forked child makes one more,
 *                                            prints "child <pid>", waits for the file GATE.1,
 *                                            then execs EXE threads PATH 1 2
 * Prints "tid <n>" for every thread that makes calls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*malloc_t)(void**, size_t);

/* Waits (10 ms polls) until the file GATE.K exists. */
static void wait_gate(const char* gate, int k) {
  char path[4096];
  snprintf(path, sizeof(path), "%s.%d", gate, k);
  while (access(path, F_OK) != 0) usleep(10000);
}
typedef int (*sync_t)(void*);
typedef int (*devsync_t)(void);

static void* lib;
static int ncalls;

static void* sym(const char* n) {
  void* s = dlsym(lib, n);
  if (!s) {
    fprintf(stderr, "missing %s\n", n);
    exit(2);
  }
  return s;
}

static void* worker(void* arg) {
  long idx = (long)arg;
  printf("tid %ld %ld\n", (long)syscall(SYS_gettid), idx);
  malloc_t m = (malloc_t)sym("cudaMalloc");
  devsync_t ds = (devsync_t)sym("cudaDeviceSynchronize");
  for (int i = 0; i < ncalls; i++) {
    void* p;
    m(&p, 4096 * (size_t)(idx + 1));
  }
  ds();
  return NULL;
}

static int sync_pipe[2];

/* A call in flight across the detach of its library's launch probes, and calls after it. */
typedef struct {
  unsigned x, y, z;
} dim3_t;
typedef int (*rt_launch_fn)(const void*, dim3_t, dim3_t, void**, size_t, void*);
typedef int (*drv_launch_fn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void*, void**, void**);

static void* held_sync(void* arg) {
  printf("tid %ld held\n", (long)syscall(SYS_gettid));
  if (arg) {
    dim3_t g = {1, 1, 1}, b = {32, 1, 1};
    ((rt_launch_fn)sym("cudaLaunchKernel"))((void*)0xb10c, g, b, NULL, 0, (void*)0x5151);
  } else {
    ((sync_t)sym("cudaStreamSynchronize"))((void*)0xabc);
  }
  malloc_t m = (malloc_t)sym("cudaMalloc");
  for (int i = 0; i < 5; i++) {
    void* p;
    m(&p, 8192);
  }
  return NULL;
}

static void* blocker(void* arg) {
  (void)arg;
  printf("tid %ld blocked\n", (long)syscall(SYS_gettid));
  ((sync_t)sym("cudaStreamSynchronize"))((void*)0xabc);
  return NULL;
}

static int wake_pipe[2];
static int wake_n;
static long sleeper_tid;

/* Whether thread `tid` of this process is asleep (state S in /proc): blocked in its read. */
static int sleeping(long tid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", tid);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  char* close = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
  return close && close[1] == ' ' && close[2] == 'S';
}

static void* waker(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "waker");
  printf("tid %ld waker\n", (long)syscall(SYS_gettid));
  for (int i = 0; i < wake_n; i++) {
    while (!sleeping(sleeper_tid)) usleep(200);
    if (write(wake_pipe[1], "w", 1) != 1) exit(3);
  }
  return NULL;
}

/* wake-late: the sleeper's one read, which blocks before the process is a GPU process. */
static void* late_sleeper(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "sleeper");
  __atomic_store_n(&sleeper_tid, (long)syscall(SYS_gettid), __ATOMIC_RELEASE);
  char c;
  if (read(wake_pipe[0], &c, 1) != 1) exit(3);
  return NULL;
}

static int wake_late_mode(void) {
  malloc_t m = (malloc_t)sym("cudaMalloc");
  if (pipe(wake_pipe) != 0) return 3;
  printf("tid %ld main\n", (long)syscall(SYS_gettid));
  pthread_t t;
  pthread_create(&t, NULL, late_sleeper, NULL);
  long tid;
  while (!(tid = __atomic_load_n(&sleeper_tid, __ATOMIC_ACQUIRE))) usleep(100);
  printf("tid %ld sleeper\n", tid);
  while (!sleeping(tid)) usleep(200);
  void* p;
  m(&p, 4096); /* the process is a GPU process from here */
  if (write(wake_pipe[1], "w", 1) != 1) return 3;
  pthread_join(t, NULL);
  return 0;
}

/* The main thread blocks on the pipe N times; the waker wakes it each time. */
static int wake_mode(int n) {
  malloc_t m = (malloc_t)sym("cudaMalloc");
  void* p;
  m(&p, 4096); /* a GPU process from here: its threads' intervals are recorded */
  sleeper_tid = (long)syscall(SYS_gettid);
  printf("tid %ld sleeper\n", sleeper_tid);
  wake_n = n;
  if (pipe(wake_pipe) != 0) return 3;
  pthread_t t;
  pthread_create(&t, NULL, waker, NULL);
  char c;
  for (int i = 0; i < n; i++)
    if (read(wake_pipe[0], &c, 1) != 1) return 3;
  return 0; /* exits with the waker done or gone, never joined: no wakeup by its exit */
}

/* Outlives the main thread (main-exits): 8 calls, then the process's exit, status 7. */
static void* outliver(void* arg) {
  (void)arg;
  usleep(300 * 1000);
  malloc_t m = (malloc_t)sym("cudaMalloc");
  for (int i = 0; i < 8; i++) {
    void* p;
    m(&p, 4096);
  }
  exit(7);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 3) return 2;
  lib = dlopen(argv[2], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  printf("pid %d\n", getpid());
  if (!strcmp(argv[1], "threads")) {
    int n = argc > 3 ? atoi(argv[3]) : 4;
    ncalls = argc > 4 ? atoi(argv[4]) : 10;
    pthread_t t[64];
    for (long i = 0; i < n && i < 64; i++) pthread_create(&t[i], NULL, worker, (void*)i);
    for (long i = 0; i < n && i < 64; i++) pthread_join(t[i], NULL);
  } else if (!strcmp(argv[1], "launches")) {
    typedef struct {
      unsigned x, y, z;
    } dim3;
    typedef int (*rt_launch_t)(const void*, dim3, dim3, void**, size_t, void*);
    typedef int (*drv_launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, void*, void**, void**);
    rt_launch_t rt = (rt_launch_t)sym("cudaLaunchKernel");
    void* drv_lib = dlopen("libcuda.so.1", RTLD_NOW);
    drv_launch_t drv = drv_lib ? (drv_launch_t)dlsym(drv_lib, "cuLaunchKernel") : NULL;
    if (!drv) {
      fprintf(stderr, "no libcuda.so.1 cuLaunchKernel\n");
      return 2;
    }
    int n = argc > 3 ? atoi(argv[3]) : 10, m = argc > 4 ? atoi(argv[4]) : 5;
    int gap_us = argc > 5 ? atoi(argv[5]) : 0; /* between runtime launches */
    dim3 g = {8, 4, 1}, b = {128, 1, 1};
    for (int i = 0; i < n; i++) {
      rt((void*)0xf00d, g, b, NULL, 0, (void*)0x5151);
      if (gap_us) usleep(gap_us);
    }
    for (int i = 0; i < m; i++) drv((void*)0xbeef, 2, 1, 1, 64, 1, 1, 0, (void*)0x5151, NULL, NULL);
  } else if (!strcmp(argv[1], "detach") || !strcmp(argv[1], "detach-launch")) {
    int launch = !strcmp(argv[1], "detach-launch");
    rt_launch_fn rt = (rt_launch_fn)sym("cudaLaunchKernel");
    int n = argc > 3 ? atoi(argv[3]) : 3000;
    if (argc < 5 || pipe(sync_pipe) != 0) return 2;
    char fd[16];
    snprintf(fd, sizeof(fd), "%d", sync_pipe[0]);
    setenv(launch ? "INGERO_FAKE_LAUNCH_FD" : "INGERO_FAKE_SYNC_FD", fd, 1);
    pthread_t t;
    pthread_create(&t, NULL, held_sync, launch ? (void*)1 : NULL);
    usleep(100 * 1000); /* the call is entered */
    dim3_t g = {8, 4, 1}, b = {128, 1, 1};
    for (int i = 0; i < n; i++) rt((void*)0xf00d, g, b, NULL, 0, (void*)0x5151);
    printf("launched\n");
    wait_gate(argv[4], 1);
    if (write(sync_pipe[1], "x", 1) != 1) return 3;
    pthread_join(t, NULL);
    for (int i = 0; i < 10; i++) rt((void*)0xf00d, g, b, NULL, 0, (void*)0x5151);
  } else if (!strcmp(argv[1], "after-direct") || !strcmp(argv[1], "between-direct")) {
    int between = !strcmp(argv[1], "between-direct");
    rt_launch_fn rt = (rt_launch_fn)sym("cudaLaunchKernel");
    void* drv_lib = dlopen("libcuda.so.1", RTLD_NOW);
    drv_launch_fn drv = drv_lib ? (drv_launch_fn)dlsym(drv_lib, "cuLaunchKernel") : NULL;
    int n = argc > 3 ? atoi(argv[3]) : 3000;
    if (!drv || argc < 5) return 2;
    dim3_t g = {8, 4, 1}, b = {128, 1, 1};
    for (int i = 0; i < n; i++) rt((void*)0xf00d, g, b, NULL, 0, (void*)0x5151);
    printf("launched\n");
    wait_gate(argv[4], 1);
    for (int i = 0; i < (between ? 1000 : 4); i++) {
      drv((void*)0xbeef, 2, 1, 1, 64, 1, 1, 0, (void*)0x5151, NULL, NULL);
      if (!between) usleep(250 * 1000);
      rt((void*)0xf00d, g, b, NULL, 0, (void*)0x5151);
      if (between) rt((void*)0xf00d, g, b, NULL, 0, (void*)0x5151);
    }
  } else if (!strcmp(argv[1], "exit-midcall")) {
    pthread_t t;
    setenv("INGERO_FAKE_SYNC_BLOCK", "1", 1);
    pthread_create(&t, NULL, blocker, NULL);
    usleep(300 * 1000);
    exit(0);
  } else if (!strcmp(argv[1], "main-exits")) {
    malloc_t m = (malloc_t)sym("cudaMalloc");
    for (int i = 0; i < 2; i++) {
      void* p;
      m(&p, 4096);
    }
    pthread_t t;
    pthread_create(&t, NULL, outliver, NULL);
    pthread_exit(NULL);
  } else if (!strcmp(argv[1], "exec-child")) {
    if (argc < 5) return 2;
    malloc_t m = (malloc_t)sym("cudaMalloc");
    void* p;
    m(&p, 4096);
    pid_t c = fork();
    if (c == 0) {
      m(&p, 4096);
      printf("child %d\n", getpid());
      wait_gate(argv[3], 1);
      execl(argv[4], argv[4], "threads", argv[2], "1", "2", (char*)NULL);
      _exit(127);
    }
    int status = 0;
    waitpid(c, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  } else if (!strcmp(argv[1], "late")) {
    printf("loaded\n");
    char line[64];
    if (!fgets(line, sizeof(line), stdin)) return 3;
    malloc_t m = (malloc_t)sym("cudaMalloc");
    for (int i = 0; i < 5; i++) {
      void* p;
      m(&p, 1 << 20);
    }
  } else if (!strcmp(argv[1], "steps")) {
    int n = argc > 3 ? atoi(argv[3]) : 100;
    if (argc > 4) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(atoi(argv[4]), &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    typedef struct {
      unsigned x, y, z;
    } dim3;
    typedef int (*launch_t)(const void*, dim3, dim3, void**, size_t, void*);
    int hip = argc > 5 && !strcmp(argv[5], "hip");
    launch_t launch = (launch_t)sym(hip ? "hipLaunchKernel" : "cudaLaunchKernel");
    sync_t sync = (sync_t)sym(hip ? "hipStreamSynchronize" : "cudaStreamSynchronize");
    dim3 g = {64, 1, 1}, b = {256, 1, 1};
    printf("tid %ld steps\n", (long)syscall(SYS_gettid));
    const char* gate = getenv("INGERO_FAKE_GATE");
    for (int i = 0; i < n; i++) {
      if (gate && i && i % (n / 4 ? n / 4 : 1) == 0) wait_gate(gate, i / (n / 4 ? n / 4 : 1));
      for (int k = 0; k < 16; k++) launch((const void*)0x1234, g, b, NULL, 0, (void*)0x5151);
      sync((void*)0x5151);
    }
  } else if (!strcmp(argv[1], "graphs")) {
    /* A known graph lifecycle: graph A captured, instantiated and launched 40 times on stream
     * 0x5151; graph B captured and instantiated, never launched; A re-instantiated 3 times
     * (a re-capture storm) and launched 10 more times; one failed instantiation. Prints the
     * handles: "graph <graph> exec <exec>". */
    typedef int (*begin_t)(void*, int);
    typedef int (*end_t)(void*, void**);
    typedef int (*inst_t)(void**, void*, unsigned long long);
    typedef int (*glaunch_t)(void*, void*);
    begin_t begin = (begin_t)sym("cudaStreamBeginCapture");
    end_t end = (end_t)sym("cudaStreamEndCapture");
    inst_t inst = (inst_t)sym("cudaGraphInstantiate");
    glaunch_t glaunch = (glaunch_t)sym("cudaGraphLaunch");
    void *ga, *gb, *ea, *eb;
    begin((void*)0x5151, 0);
    end((void*)0x5151, &ga);
    inst(&ea, ga, 0);
    printf("graph %p exec %p\n", ga, ea);
    for (int i = 0; i < 40; i++) glaunch(ea, (void*)0x5151);
    begin((void*)0x6161, 0);
    end((void*)0x6161, &gb);
    inst(&eb, gb, 0);
    printf("graph %p exec %p\n", gb, eb);
    for (int r = 0; r < 3; r++) {
      begin((void*)0x5151, 0);
      end((void*)0x5151, &ga);
      inst(&ea, ga, 0);
      printf("graph %p exec %p\n", ga, ea);
    }
    for (int i = 0; i < 10; i++) glaunch(ea, (void*)0x5151);
    void* none;
    printf("failed %d\n", inst(&none, NULL, 0));
  } else if (!strcmp(argv[1], "wake-late")) {
    return wake_late_mode();
  } else if (!strcmp(argv[1], "wake")) {
    return wake_mode(argc > 3 ? atoi(argv[3]) : 20);
  } else if (!strcmp(argv[1], "unload")) {
    malloc_t m = (malloc_t)sym("cudaMalloc");
    void* p;
    for (int i = 0; i < 3; i++) m(&p, 100);
    dlclose(lib);
    lib = dlopen(argv[2], RTLD_NOW);
    m = (malloc_t)sym("cudaMalloc");
    for (int i = 0; i < 2; i++) m(&p, 200);
  }
  return 0;
}

/* Planted training-loop faults on the real CUDA runtime, for tests/bpf/faults_test.cc.
 *
 *   step_faults MODE STEPS [DIR]
 *
 * Every step ends with a loss read (a 4-byte device-to-host copy and a stream sync on one line),
 * the round trip the step model finds the cadence by. MODE plants one fault per step:
 *   loader   next_batch() burns 8 ms of CPU ("decode") before uploading the batch
 *   rowsync  mask_rows() reads one value back per row: 32 copies + syncs per step
 *   ckpt     save_checkpoint() copies the weights back, writes 8 MB to DIR and fsyncs it
 *   churn    reset_buffers() frees and re-allocates device memory every step
 *   launches 200 small launches per step with a little host work between them (run it next
 *            to a CPU hog on the same core for CPU contention)
 *   launchloop  400 tiny launches per step from one line, then the host spins to the step's
 *            10 ms deadline before the loss read (a paced loop: the cadence holds on a loaded
 *            machine; the GPU has work queued throughout, so the spin is no host gap).
 *            tests/bpf/device_test.cc measures its GPU with a stand-in NVML
 * Without a GPU every call fails, but every call enters the library, which is what the tracer
 * sees. Built with -g and frame pointers: the stacks resolve to this file's lines, which it
 * prints as "NAME_line N", with "pid P".
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char host_buf[1 << 20];
static void* dev_buf = (void*)0x7000000;
static const dim3 kGrid = {64, 1, 1}, kBlock = {128, 1, 1};

static void line(const char* name, int n) {
  static char seen[8][16];
  for (int i = 0; i < 8; i++) {
    if (!strcmp(seen[i], name)) return;
    if (!seen[i][0]) {
      snprintf(seen[i], sizeof(seen[i]), "%s", name);
      printf("%s_line %d\n", name, n);
      return;
    }
  }
}

static void burn_us(long us) {
  struct timespec t0, t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

__attribute__((noinline)) static void launch(int n) {
  for (int i = 0; i < n; i++)
    (void)cudaLaunchKernel((const void*)0xf00d, kGrid, kBlock, NULL, 0, 0);
}

/* CALL: a call at a line this program reports. READ_BACK: one value read back, the copy and the
 * sync on one line, as .item() does. */
#define CALL(name, call) (line(name, __LINE__), (void)(call))
#define READ_BACK(name, dst)                                                     \
  (line(name, __LINE__),                                                         \
   (void)cudaMemcpyAsync(dst, dev_buf, sizeof(*dst), cudaMemcpyDeviceToHost, 0), \
   (void)cudaStreamSynchronize(0))

__attribute__((noinline)) static void tiny_kernels(void) {
  for (int i = 0; i < 400; i++)
    CALL("launchloop", cudaLaunchKernel((const void*)0xf00d, kGrid, kBlock, NULL, 0, 0));
}

static long long mono_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

__attribute__((noinline)) static void read_loss(void) {
  float loss;
  READ_BACK("loss", &loss);
}

__attribute__((noinline)) static void next_batch(void) {
  line("decode", __LINE__), burn_us(8000); /* decode + augment, on the training thread */
  CALL("upload", cudaMemcpy(dev_buf, host_buf, 256 << 10, cudaMemcpyHostToDevice));
}

__attribute__((noinline)) static void mask_rows(void) {
  for (int r = 0; r < 32; r++) {
    launch(1);
    float v;
    READ_BACK("row", &v);
    burn_us(150); /* the Python branch on the value */
  }
}

__attribute__((noinline)) static void save_checkpoint(const char* dir) {
  CALL("ckpt", cudaMemcpy(host_buf, dev_buf, sizeof(host_buf), cudaMemcpyDeviceToHost));
  char path[512];
  snprintf(path, sizeof(path), "%s/ckpt.bin", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror(path);
    exit(2);
  }
  for (int i = 0; i < 8; i++)
    if (write(fd, host_buf, sizeof(host_buf)) != (ssize_t)sizeof(host_buf)) exit(3);
  fsync(fd);
  close(fd);
}

__attribute__((noinline)) static void reset_buffers(void) {
  for (int i = 0; i < 4; i++) {
    CALL("free", cudaFree(dev_buf));
    CALL("malloc", cudaMalloc(&dev_buf, 64u << 20));
    if (!dev_buf) dev_buf = (void*)0x7000000;
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: step_faults loader|rowsync|ckpt|churn|launches|launchloop STEPS [DIR]\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argv[1];
  int steps = atoi(argv[2]);
  const char* dir = argc > 3 ? argv[3] : "/var/tmp";
  printf("pid %d\n", getpid());
  read_loss();   /* the first GPU call marks the process as traced; then off-CPU once, so the */
  usleep(20000); /* trace has scheduler events for it even when nothing preempts it */
  for (int s = 0; s < steps; s++) {
    if (!strcmp(mode, "loader")) {
      next_batch();
      launch(20);
    } else if (!strcmp(mode, "rowsync")) {
      launch(20);
      burn_us(1000);
      mask_rows();
    } else if (!strcmp(mode, "ckpt")) {
      launch(20);
      burn_us(2000);
    } else if (!strcmp(mode, "churn")) {
      launch(8);
      burn_us(2000);
      reset_buffers();
    } else if (!strcmp(mode, "launchloop")) {
      static long long deadline;
      if (!deadline) deadline = mono_us();
      deadline += 10000;
      tiny_kernels();
      while (mono_us() < deadline) {
      }
    } else if (!strcmp(mode, "launches")) {
      for (int i = 0; i < 200; i++) {
        launch(1);
        burn_us(20);
      }
    } else {
      fprintf(stderr, "unknown mode %s\n", mode);
      return 2;
    }
    read_loss();
    if (!strcmp(mode, "ckpt")) save_checkpoint(dir);
  }
  printf("steps %d\n", steps);
  return 0;
}

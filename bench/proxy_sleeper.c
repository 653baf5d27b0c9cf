/* The step proxy's pin-memory thread (bench/step_proxy.py): a native thread of the traced
 * process that the stepping threads wake a few times a step and that then sleeps again,
 * without the GIL, as PyTorch's pin-memory thread wakes for each batch. The proxy so has about
 * the context switches a call of real training (fixtures/h100/resnet-clean: 0.058), whatever
 * the host's speed, without its stepping threads waiting on anything. */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

static atomic_int stopping;
static sem_t wake;
static pthread_t thread;

static void* sleep_loop(void* unused) {
  (void)unused;
  while (!atomic_load(&stopping)) sem_wait(&wake);
  return NULL;
}

__attribute__((visibility("default"))) int proxy_sleeper_start(void) {
  atomic_store(&stopping, 0);
  if (sem_init(&wake, 0, 0)) return -1;
  return pthread_create(&thread, NULL, sleep_loop, NULL);
}

/* One batch: wakes the thread, which goes back to sleep at once. */
__attribute__((visibility("default"))) void proxy_sleeper_post(void) { sem_post(&wake); }

__attribute__((visibility("default"))) void proxy_sleeper_stop(void) {
  atomic_store(&stopping, 1);
  sem_post(&wake);
  pthread_join(thread, NULL);
  sem_destroy(&wake);
}

/* TEST ONLY: a stand-in libnvidia-ml.so.1 serving scripted figures, so the NVML side channel
 * runs where there is no NVIDIA GPU. It implements the NVML functions ingero calls with the
 * documented signatures, nothing of the driver.
 *
 * The script is the file named by FAKE_NVML_SCRIPT, read at nvmlInit_v2, one item a line
 * ('#' starts a comment):
 *   init CODE                     nvmlInit_v2 returns CODE (9: NVML_ERROR_DRIVER_NOT_LOADED)
 *   init hang | init crash        nvmlInit_v2 never returns | dies of SIGSEGV (a broken driver)
 *   poll hang after_ms=T | poll crash after_ms=T
 *       nvmlDeviceGetUtilizationRates, called T ms or more after nvmlInit_v2, never returns |
 *       dies of SIGSEGV (a driver that breaks while it is polled)
 *   count N                       nvmlDeviceGetCount_v2 says N (a broken library's count)
 *   driver_fill                   nvmlSystemGetDriverVersion fills its buffer, no NUL
 *   device uuid=U name=N gpu=P mem=P used=B total=B sm_clock=MHZ mem_clock=MHZ power=MW
 *          temp=C reasons=BITS ecc_unc=N ecc_cor=N procs=0|1
 *       one device; a figure left out or written "-" answers NVML_ERROR_NOT_SUPPORTED;
 *       procs=0: nvmlDeviceGetProcessUtilization answers NOT_SUPPORTED
 *   proc device=I (pid=P | comm=NAME) sm=P mem=P used=B
 *       per-process samples, one a call (stamped now) for the pid, or for every process
 *       whose /proc/PID/comm is NAME; used= is its memory (running processes)
 *   xid device=I code=X after_ms=T    one Xid event, delivered T ms after nvmlInit_v2
 *   ecc device=I after_ms=T unc=N cor=N   the volatile ECC totals rise by N after T ms
 *
 * Built twice (tests/CMakeLists.txt): fake/nvml-full has every function ingero may call;
 * fake/nvml (FAKE_NVML_PARTIAL) lacks the optional nvmlDeviceGetComputeRunningProcesses_v3,
 * nvmlDeviceGetCurrentClocksEventReasons (and the older ThrottleReasons),
 * nvmlDeviceGetTotalEccErrors and nvmlDeviceGetSupportedEventTypes.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define MAX_DEV 8
#define MAX_ITEMS 64

typedef int nvmlReturn_t;
enum {
  OK = 0,
  E_UNINIT = 1,
  E_ARG = 2,
  E_UNSUPPORTED = 3,
  E_NOT_FOUND = 6,
  E_SIZE = 7,
  E_TIMEOUT = 10,
};

struct fdev {
  char uuid[96], name[96];
  long long fig[11]; /* -1: not supported */
  int procs;
};
enum {
  F_GPU,
  F_MEM,
  F_USED,
  F_TOTAL,
  F_SMCLK,
  F_MEMCLK,
  F_POWER,
  F_TEMP,
  F_REASONS,
  F_ECCU,
  F_ECCC
};
static const char* const kFigKeys[] = {"gpu",      "mem",       "used",   "total",
                                       "sm_clock", "mem_clock", "power",  "temp",
                                       "reasons",  "ecc_unc",   "ecc_cor"};

struct fproc {
  int device;
  long long pid; /* 0: by comm */
  char comm[32];
  unsigned sm, mem;
  long long used; /* -1: none */
};
struct fxid {
  int device, delivered;
  long long code, after_ms;
};
struct fecc {
  int device;
  long long after_ms, unc, cor;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fdev devs[MAX_DEV];
static int ndev;
static struct fproc procs[MAX_ITEMS];
static int nproc;
static struct fxid xids[MAX_ITEMS];
static int nxid;
static struct fecc eccs[MAX_ITEMS];
static int necc;
static int init_code, init_hang, init_crash, driver_fill;
static long long poll_hang_ms = -1, poll_crash_ms = -1;
static long long count_override = -1;
static long long init_ms;

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static unsigned long long now_us(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (unsigned long long)tv.tv_sec * 1000000ULL + (unsigned long long)tv.tv_usec;
}

static const char* value_of(const char* line, const char* key, char* out, size_t n) {
  size_t k = strlen(key);
  for (const char* p = line; (p = strstr(p, key)) != NULL; p += k) {
    if ((p == line || p[-1] == ' ' || p[-1] == '\t') && p[k] == '=') {
      size_t i = 0;
      for (p += k + 1; *p && *p != ' ' && *p != '\t' && *p != '\n' && i + 1 < n; ++p) out[i++] = *p;
      out[i] = 0;
      return out;
    }
  }
  return NULL;
}

static long long num(const char* line, const char* key, long long dflt) {
  char v[96];
  if (!value_of(line, key, v, sizeof v) || !strcmp(v, "-")) return dflt;
  return strtoll(v, NULL, 0);
}

static void load_script(void) {
  ndev = nproc = nxid = necc = 0;
  init_code = OK;
  init_hang = init_crash = driver_fill = 0;
  poll_hang_ms = poll_crash_ms = -1;
  count_override = -1;
  const char* path = getenv("FAKE_NVML_SCRIPT");
  FILE* f = path ? fopen(path, "r") : NULL;
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char* hash = strchr(line, '#');
    if (hash) *hash = 0;
    if (!strncmp(line, "init hang", 9)) {
      init_hang = 1;
    } else if (!strncmp(line, "init crash", 10)) {
      init_crash = 1;
    } else if (!strncmp(line, "poll hang", 9)) {
      poll_hang_ms = num(line, "after_ms", 0);
    } else if (!strncmp(line, "poll crash", 10)) {
      poll_crash_ms = num(line, "after_ms", 0);
    } else if (!strncmp(line, "count ", 6)) {
      count_override = atoll(line + 6);
    } else if (!strncmp(line, "driver_fill", 11)) {
      driver_fill = 1;
    } else if (!strncmp(line, "init ", 5)) {
      init_code = atoi(line + 5);
    } else if (!strncmp(line, "device", 6) && ndev < MAX_DEV) {
      struct fdev* d = &devs[ndev++];
      memset(d, 0, sizeof *d);
      if (!value_of(line, "uuid", d->uuid, sizeof d->uuid))
        snprintf(d->uuid, sizeof d->uuid, "GPU-fake-%d", ndev - 1);
      if (!value_of(line, "name", d->name, sizeof d->name)) strcpy(d->name, "Fake NVML GPU");
      for (char* c = d->name; *c; ++c)
        if (*c == '_') *c = ' ';
      for (int i = 0; i < 11; ++i) d->fig[i] = num(line, kFigKeys[i], -1);
      d->procs = (int)num(line, "procs", 1);
    } else if (!strncmp(line, "proc", 4) && nproc < MAX_ITEMS) {
      struct fproc* p = &procs[nproc++];
      memset(p, 0, sizeof *p);
      p->device = (int)num(line, "device", 0);
      p->pid = num(line, "pid", 0);
      value_of(line, "comm", p->comm, sizeof p->comm);
      p->sm = (unsigned)num(line, "sm", 0);
      p->mem = (unsigned)num(line, "mem", 0);
      p->used = num(line, "used", -1);
    } else if (!strncmp(line, "xid", 3) && nxid < MAX_ITEMS) {
      struct fxid* x = &xids[nxid++];
      x->device = (int)num(line, "device", 0);
      x->code = num(line, "code", 0);
      x->after_ms = num(line, "after_ms", 0);
      x->delivered = 0;
    } else if (!strncmp(line, "ecc", 3) && necc < MAX_ITEMS) {
      struct fecc* e = &eccs[necc++];
      e->device = (int)num(line, "device", 0);
      e->after_ms = num(line, "after_ms", 0);
      e->unc = num(line, "unc", 0);
      e->cor = num(line, "cor", 0);
    }
  }
  fclose(f);
}

/* Device handles are 1-based indexes disguised as pointers. */
static int dev_of(void* h) {
  long i = (long)h - 1;
  return i >= 0 && i < ndev ? (int)i : -1;
}

/* The pids a proc line stands for: its pid, or every process whose comm is its name. */
static int pids_of(const struct fproc* p, unsigned* out, int max) {
  if (p->pid) {
    out[0] = (unsigned)p->pid;
    return 1;
  }
  int n = 0;
  DIR* d = opendir("/proc");
  if (!d) return 0;
  struct dirent* e;
  while ((e = readdir(d)) && n < max) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], comm[64] = {0};
    snprintf(path, sizeof path, "/proc/%s/comm", e->d_name);
    FILE* f = fopen(path, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
    fclose(f);
    if (!strcmp(comm, p->comm)) out[n++] = (unsigned)atoi(e->d_name);
  }
  closedir(d);
  return n;
}

API nvmlReturn_t nvmlInit_v2(void) {
  pthread_mutex_lock(&mu);
  load_script();
  init_ms = now_ms();
  int rc = init_code;
  int hang = init_hang, crash = init_crash;
  pthread_mutex_unlock(&mu);
  while (hang) pause();
  if (crash) *(volatile int*)0 = 1;
  return rc;
}

API nvmlReturn_t nvmlShutdown(void) { return OK; }

API const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case OK:
      return "Success";
    case E_UNINIT:
      return "Uninitialized";
    case E_ARG:
      return "Invalid Argument";
    case E_UNSUPPORTED:
      return "Not Supported";
    case E_NOT_FOUND:
      return "Not Found";
    case E_SIZE:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    case E_TIMEOUT:
      return "Timeout";
    default:
      return "Unknown Error";
  }
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned int n) {
  if (driver_fill) {
    memset(v, 'V', n);
    return OK;
  }
  snprintf(v, n, "999.0-fake");
  return OK;
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = count_override >= 0 ? (unsigned)count_override : (unsigned)ndev;
  return OK;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** h) {
  if ((int)i >= ndev) return E_ARG;
  *h = (void*)(long)(i + 1);
  return OK;
}

API nvmlReturn_t nvmlDeviceGetUUID(void* h, char* out, unsigned int n) {
  int i = dev_of(h);
  if (i < 0) return E_ARG;
  snprintf(out, n, "%s", devs[i].uuid);
  return OK;
}

API nvmlReturn_t nvmlDeviceGetName(void* h, char* out, unsigned int n) {
  int i = dev_of(h);
  if (i < 0) return E_ARG;
  snprintf(out, n, "%s", devs[i].name);
  return OK;
}

static nvmlReturn_t figure(void* h, int which, long long* v) {
  int i = dev_of(h);
  if (i < 0) return E_ARG;
  if (devs[i].fig[which] < 0) return E_UNSUPPORTED;
  *v = devs[i].fig[which];
  return OK;
}

API nvmlReturn_t nvmlDeviceGetUtilizationRates(void* h, unsigned int* u) {
  long long g, m, since = now_ms() - init_ms;
  if (poll_crash_ms >= 0 && since >= poll_crash_ms) *(volatile int*)0 = 1;
  while (poll_hang_ms >= 0 && since >= poll_hang_ms) pause();
  nvmlReturn_t r = figure(h, F_GPU, &g);
  if (r != OK) return r;
  if (figure(h, F_MEM, &m) != OK) m = 0;
  u[0] = (unsigned)g;
  u[1] = (unsigned)m;
  return OK;
}

struct sample {
  unsigned int pid;
  unsigned long long ts;
  unsigned int sm, mem, enc, dec;
};

API nvmlReturn_t nvmlDeviceGetProcessUtilization(void* h, struct sample* out, unsigned int* count,
                                                 unsigned long long last_seen) {
  int d = dev_of(h);
  if (d < 0 || !count) return E_ARG;
  if (!devs[d].procs) return E_UNSUPPORTED;
  unsigned long long ts = now_us();
  unsigned pids[64];
  unsigned n = 0;
  for (int i = 0; i < nproc; ++i) {
    if (procs[i].device != d || ts <= last_seen) continue;
    int k = pids_of(&procs[i], pids, 64);
    for (int j = 0; j < k; ++j) {
      if (out && n < *count) {
        out[n].pid = pids[j];
        out[n].ts = ts;
        out[n].sm = procs[i].sm;
        out[n].mem = procs[i].mem;
        out[n].enc = out[n].dec = 0;
      }
      ++n;
    }
  }
  if (!n) {
    *count = 0;
    return E_NOT_FOUND;
  }
  if (!out || n > *count) {
    *count = n;
    return E_SIZE;
  }
  *count = n;
  return OK;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(void* h, unsigned long long* m) {
  long long used, total;
  nvmlReturn_t r = figure(h, F_USED, &used);
  if (r == OK) r = figure(h, F_TOTAL, &total);
  if (r != OK) return r;
  m[0] = (unsigned long long)total;
  m[1] = (unsigned long long)(total - used);
  m[2] = (unsigned long long)used;
  return OK;
}

API nvmlReturn_t nvmlDeviceGetClockInfo(void* h, int type, unsigned int* mhz) {
  long long v;
  nvmlReturn_t r = figure(h, type == 2 ? F_MEMCLK : F_SMCLK, &v);
  if (r == OK) *mhz = (unsigned)v;
  return r;
}

API nvmlReturn_t nvmlDeviceGetPowerUsage(void* h, unsigned int* mw) {
  long long v;
  nvmlReturn_t r = figure(h, F_POWER, &v);
  if (r == OK) *mw = (unsigned)v;
  return r;
}

API nvmlReturn_t nvmlDeviceGetTemperature(void* h, int sensor, unsigned int* c) {
  long long v;
  if (sensor != 0) return E_ARG;
  nvmlReturn_t r = figure(h, F_TEMP, &v);
  if (r == OK) *c = (unsigned)v;
  return r;
}

#ifndef FAKE_NVML_PARTIAL
struct process_info {
  unsigned int pid;
  unsigned long long used;
  unsigned int gi, ci;
};

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void* h, unsigned int* count,
                                                         struct process_info* out) {
  int d = dev_of(h);
  if (d < 0 || !count) return E_ARG;
  unsigned pids[64];
  unsigned n = 0;
  for (int i = 0; i < nproc; ++i) {
    if (procs[i].device != d || procs[i].used < 0) continue;
    int k = pids_of(&procs[i], pids, 64);
    for (int j = 0; j < k; ++j) {
      if (out && n < *count) {
        out[n].pid = pids[j];
        out[n].used = (unsigned long long)procs[i].used;
        out[n].gi = out[n].ci = 0xFFFFFFFFu;
      }
      ++n;
    }
  }
  if (n > *count || (!out && n)) {
    *count = n;
    return E_SIZE;
  }
  *count = n;
  return OK;
}

API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(void* h, unsigned long long* bits) {
  long long v;
  nvmlReturn_t r = figure(h, F_REASONS, &v);
  if (r == OK) *bits = (unsigned long long)v;
  return r;
}

API nvmlReturn_t nvmlDeviceGetTotalEccErrors(void* h, int type, int counter,
                                             unsigned long long* n) {
  int d = dev_of(h);
  long long v;
  if (counter != 0) return E_ARG;
  nvmlReturn_t r = figure(h, type == 1 ? F_ECCU : F_ECCC, &v);
  if (r != OK) return r;
  long long since = now_ms() - init_ms;
  for (int i = 0; i < necc; ++i)
    if (eccs[i].device == d && since >= eccs[i].after_ms)
      v += type == 1 ? eccs[i].unc : eccs[i].cor;
  *n = (unsigned long long)v;
  return OK;
}

API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(void* h, unsigned long long* types) {
  if (dev_of(h) < 0) return E_ARG;
  *types = 0x8 | 0x1 | 0x2;
  return OK;
}
#endif

/* The event set: one per process is enough for ingero. */
static int registered[MAX_DEV];

API nvmlReturn_t nvmlEventSetCreate(void** set) {
  *set = (void*)registered;
  return OK;
}

API nvmlReturn_t nvmlDeviceRegisterEvents(void* h, unsigned long long types, void* set) {
  int d = dev_of(h);
  if (d < 0 || set != (void*)registered) return E_ARG;
  if (!(types & 0x8)) return E_UNSUPPORTED;
  registered[d] = 1;
  return OK;
}

struct event_data {
  void* device;
  unsigned long long type, data;
  unsigned int gi, ci;
};

API nvmlReturn_t nvmlEventSetWait_v2(void* set, struct event_data* out, unsigned int timeout_ms) {
  if (set != (void*)registered) return E_ARG;
  long long deadline = now_ms() + timeout_ms;
  for (;;) {
    pthread_mutex_lock(&mu);
    long long since = now_ms() - init_ms;
    for (int i = 0; i < nxid; ++i) {
      struct fxid* x = &xids[i];
      if (x->delivered || since < x->after_ms || x->device >= ndev || !registered[x->device])
        continue;
      x->delivered = 1;
      out->device = (void*)(long)(x->device + 1);
      out->type = 0x8;
      out->data = (unsigned long long)x->code;
      out->gi = out->ci = 0xFFFFFFFFu;
      pthread_mutex_unlock(&mu);
      return OK;
    }
    /* Asleep until the next Xid is due or the wait ends, as the driver blocks on its fd: a
     * stand-in that woke every few ms would cost CPU the real library does not. */
    long long wake = deadline;
    for (int i = 0; i < nxid; ++i) {
      struct fxid* x = &xids[i];
      if (!x->delivered && x->device < ndev && registered[x->device] &&
          init_ms + x->after_ms < wake)
        wake = init_ms + x->after_ms;
    }
    pthread_mutex_unlock(&mu);
    long long now = now_ms();
    if (now >= deadline) return E_TIMEOUT;
    if (wake > now) usleep((useconds_t)((wake - now) * 1000));
  }
}

API nvmlReturn_t nvmlEventSetFree(void* set) { return set == (void*)registered ? OK : E_ARG; }

#include "backends/nvml/nvml_sampler.h"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ingero::backends::nvml {
namespace {

constexpr int64_t kMaxPeriodNs = 1'000'000'000;  // NVML's longest sample period
constexpr unsigned int kEventWaitMs = 200;       // how soon the event thread sees a stop

int64_t clamp_period(int64_t p) { return std::clamp<int64_t>(p, 0, kMaxPeriodNs); }

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// NVML's own limit is 64 GPUs a host; room for more, none for nonsense.
constexpr unsigned int kMaxDevices = 1024;

// A string NVML wrote into a buffer of `size` bytes: up to its NUL, never past the buffer (a
// library that fills it without one ends it).
template <size_t size>
std::string text(const char (&buf)[size]) {
  return std::string(buf, strnlen(buf, size));
}

}  // namespace

std::string_view xid_name(int64_t xid) {
  switch (xid) {
    case 13:
      return "Graphics Engine Exception";
    case 31:
      return "GPU memory page fault";
    case 32:
      return "Invalid or corrupted push buffer stream";
    case 38:
      return "Driver firmware error";
    case 43:
      return "GPU stopped processing";
    case 45:
      return "Preemptive cleanup, due to previous errors";
    case 48:
      return "Double Bit ECC Error";
    case 61:
      return "Internal micro-controller breakpoint/warning";
    case 62:
      return "Internal micro-controller halt";
    case 63:
      return "ECC page retirement or row remapping recording event";
    case 64:
      return "ECC page retirement or row remapper recording failure";
    case 69:
      return "Graphics Engine class error";
    case 74:
      return "NVLink Error";
    case 79:
      return "GPU has fallen off the bus";
    case 92:
      return "High single-bit ECC error rate";
    case 94:
      return "Contained ECC error";
    case 95:
      return "Uncontained ECC error";
    case 109:
      return "Context Switch Timeout Error";
    case 119:
      return "GSP RPC Timeout";
    case 120:
      return "GSP Error";
    case 121:
      return "C2C Link Error";
    case 140:
      return "Unrecovered ECC Error";
    default:
      return "";
  }
}

Result<std::unique_ptr<NvmlSampler>> NvmlSampler::open(const hal::DeviceSamplerOptions& opts) {
  auto lib = NvmlLibrary::open(opts.nvml_library);
  if (!lib) return lib.error();
  if (auto st = (*lib)->init(); !st) return st.error();
  std::unique_ptr<NvmlSampler> s(new NvmlSampler(std::move(*lib), opts.poll_ns));
  NvmlLibrary& l = *s->lib_;
  unsigned int n = 0;
  if (nvmlReturn_t r = l.device_count(&n); r != NVML_SUCCESS)
    return make_error("nvmlDeviceGetCount_v2 failed: " + l.describe(r));
  if (n > kMaxDevices)  // a library that answers this is broken: 4 billion took minutes to walk
    return make_error("nvmlDeviceGetCount_v2 says " + std::to_string(n) +
                      " devices, more than any host has (a broken library?)");
  for (unsigned int i = 0; i < n; ++i) {
    Device d;
    d.index = i;
    if (nvmlReturn_t r = l.device_handle(i, &d.handle); r != NVML_SUCCESS) {
      s->info_.absent.push_back("device " + std::to_string(i) + " (" + l.describe(r) + ")");
      continue;
    }
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (l.device_uuid(d.handle, buf, sizeof(buf)) == NVML_SUCCESS) d.uuid = text(buf);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (l.device_name && l.device_name(d.handle, name, sizeof(name)) == NVML_SUCCESS)
      d.name = text(name);
    s->devices_.push_back(std::move(d));
  }
  s->info_.source = "nvml";
  s->info_.library = l.name();
  char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (l.driver_version && l.driver_version(version, sizeof(version)) == NVML_SUCCESS)
    s->info_.library += " (driver " + text(version) + ")";
  for (const Device& d : s->devices_)
    s->info_.devices.push_back(std::to_string(d.index) + ": " +
                               (d.name.empty() ? "NVIDIA GPU" : d.name) +
                               (d.uuid.empty() ? "" : " (" + d.uuid + ")"));
  s->probe();
  s->start_events();
  return s;
}

void NvmlSampler::probe() {
  NvmlLibrary& l = *lib_;
  // figure -> (devices supporting it, why not where one does not)
  struct Figure {
    std::string name;
    size_t yes = 0;
    std::string why;
  };
  std::vector<Figure> figs;
  for (const char* n : {"utilisation", "per-process utilisation", "memory", "per-process memory",
                        "clocks", "throttle reasons", "power", "temperature", "ECC totals"})
    figs.push_back({n, 0, ""});
  auto judge = [&](Figure& f, bool present, const char* symbol, auto call, bool& flag) {
    if (!present) {
      flag = false;
      f.why = std::string(symbol) + " missing";
      return;
    }
    nvmlReturn_t r = call();
    // A figure the device has but cannot give right now (no process yet) is still supported.
    bool works =
        r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE || r == NVML_ERROR_NOT_FOUND;
    if (r == NVML_ERROR_NOT_SUPPORTED) flag = false;
    if (works)
      ++f.yes;
    else if (f.why.empty())
      f.why = l.describe(r);
  };
  for (Device& d : devices_) {
    nvmlDevice_t h = d.handle;
    nvmlUtilization_t u{};
    judge(
        figs[0], true, "", [&] { return l.utilization(h, &u); }, d.util);
    unsigned int cnt = 0;
    judge(
        figs[1], true, "", [&] { return l.process_utilization(h, nullptr, &cnt, 0); }, d.procs);
    nvmlMemory_t m{};
    judge(
        figs[2], l.memory_info, "nvmlDeviceGetMemoryInfo", [&] { return l.memory_info(h, &m); },
        d.memory);
    cnt = 0;
    judge(
        figs[3], l.running_processes, "nvmlDeviceGetComputeRunningProcesses_v3",
        [&] { return l.running_processes(h, &cnt, nullptr); }, d.running);
    unsigned int mhz = 0;
    judge(
        figs[4], l.clock_info, "nvmlDeviceGetClockInfo",
        [&] { return l.clock_info(h, NVML_CLOCK_SM, &mhz); }, d.sm_clock);
    d.mem_clock = d.sm_clock;
    unsigned long long bits = 0;
    judge(
        figs[5], l.clocks_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons",
        [&] { return l.clocks_event_reasons(h, &bits); }, d.reasons);
    unsigned int mw = 0;
    judge(
        figs[6], l.power_usage, "nvmlDeviceGetPowerUsage", [&] { return l.power_usage(h, &mw); },
        d.power);
    unsigned int c = 0;
    judge(
        figs[7], l.temperature, "nvmlDeviceGetTemperature",
        [&] { return l.temperature(h, NVML_TEMPERATURE_GPU, &c); }, d.temperature);
    unsigned long long e = 0;
    judge(
        figs[8], l.total_ecc_errors, "nvmlDeviceGetTotalEccErrors",
        [&] {
          return l.total_ecc_errors(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &e);
        },
        d.ecc);
  }
  for (const Figure& f : figs) {
    if (f.yes == devices_.size() && !devices_.empty())
      info_.figures.push_back(f.name);
    else if (f.yes)
      info_.figures.push_back(f.name + " (" + std::to_string(f.yes) + " of " +
                              std::to_string(devices_.size()) + " devices)");
    else
      info_.absent.push_back(f.name + " (" + (f.why.empty() ? "no device" : f.why) + ")");
  }
}

void NvmlSampler::start_events() {
  NvmlLibrary& l = *lib_;
  if (!l.event_set_create || !l.register_events || !l.event_set_wait || !l.event_set_free) {
    info_.absent.emplace_back("Xid events (event-set functions missing)");
    return;
  }
  if (devices_.empty()) return;
  if (nvmlReturn_t r = l.event_set_create(&event_set_); r != NVML_SUCCESS) {
    info_.absent.push_back("Xid events (" + l.describe(r) + ")");
    event_set_ = nullptr;
    return;
  }
  size_t registered = 0;
  std::string why;
  for (const Device& d : devices_) {
    // Xid only: ECC errors come from the volatile totals each poll reads (a rise between polls
    // is an event), whether or not the event set would deliver them, and are not told twice.
    unsigned long long types = nvmlEventTypeXidCriticalError;
    unsigned long long supported = 0;
    if (l.supported_event_types && l.supported_event_types(d.handle, &supported) == NVML_SUCCESS)
      types &= supported;
    if (!types) {
      why = "not supported";
      continue;
    }
    nvmlReturn_t r = l.register_events(d.handle, types, event_set_);
    if (r == NVML_SUCCESS)
      ++registered;
    else if (why.empty())
      why = l.describe(r);
  }
  if (!registered) {
    info_.absent.push_back("Xid events (" + why + ")");
    l.event_set_free(event_set_);
    event_set_ = nullptr;
    return;
  }
  info_.events = true;
  info_.figures.emplace_back("Xid events");
  event_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "ingero-nvml-xid");
    event_loop();
  });
}

void NvmlSampler::event_loop() {
  NvmlLibrary& l = *lib_;
  while (!stop_.load(std::memory_order_relaxed)) {
    nvmlEventData_t data{};
    nvmlReturn_t r = l.event_set_wait(event_set_, &data, kEventWaitMs);
    if (r == NVML_ERROR_TIMEOUT) continue;
    if (r != NVML_SUCCESS) {
      // A broken event set: say so once and stop listening; the polls go on.
      hal::DeviceEvent e;
      e.ts_ns = 0;
      e.source = "nvml";
      e.kind = "event_error";
      e.code = r;
      e.detail = "nvmlEventSetWait_v2 failed: " + l.describe(r) + "; no more Xid events";
      add_event(std::move(e));
      return;
    }
    hal::DeviceEvent e;
    e.source = "nvml";
    for (const Device& d : devices_)
      if (d.handle == data.device) {
        e.device = d.index;
        e.uuid = d.uuid;
      }
    if (data.eventType & nvmlEventTypeXidCriticalError) {
      e.kind = "xid";
      e.code = int64_t(data.eventData);
      std::string_view n = xid_name(e.code);
      e.detail = "Xid " + std::to_string(e.code) + (n.empty() ? "" : " (" + std::string(n) + ")");
    } else if (data.eventType & nvmlEventTypeDoubleBitEccError) {
      e.kind = "ecc_uncorrected";
      e.code = 1;
      e.detail = "double-bit ECC error";
    } else if (data.eventType & nvmlEventTypeSingleBitEccError) {
      e.kind = "ecc_corrected";
      e.code = 1;
      e.detail = "single-bit ECC error";
    } else {
      continue;
    }
    add_event(std::move(e));
  }
}

void NvmlSampler::add_event(hal::DeviceEvent e) {
  if (!e.ts_ns) e.ts_ns = realtime_ns() - realtime_ahead_ns_.load();
  std::lock_guard<std::mutex> g(mu_);
  if (pending_.size() < 10'000) pending_.push_back(std::move(e));
}

std::vector<hal::DeviceEvent> NvmlSampler::take_events() {
  std::lock_guard<std::mutex> g(mu_);
  return std::exchange(pending_, {});
}

NvmlSampler::~NvmlSampler() {
  stop_ = true;
  if (event_thread_.joinable()) event_thread_.join();
  if (event_set_) lib_->event_set_free(event_set_);
}

bool NvmlSampler::ok(Device& d, nvmlReturn_t r, bool& still_supported, int64_t wall_ns) {
  if (r == NVML_SUCCESS) return true;
  if (r == NVML_ERROR_NOT_SUPPORTED) still_supported = false;
  if (r == NVML_ERROR_GPU_IS_LOST && !d.lost) {
    d.lost = true;
    hal::DeviceEvent e;
    e.ts_ns = wall_ns;
    e.source = "nvml";
    e.device = d.index;
    e.uuid = d.uuid;
    e.kind = "gpu_lost";
    e.code = r;
    e.detail = "NVML: GPU is lost (the device stopped answering)";
    add_event(std::move(e));
  }
  return false;
}

void NvmlSampler::per_process(Device& d, int64_t wall_ns, std::vector<hal::DeviceSample>& out,
                              bool slow) {
  NvmlLibrary& l = *lib_;
  std::map<uint32_t, size_t> latest;  // pid -> its newest sample in `out` from this poll
  if (d.procs) {
    unsigned int n = 0;
    nvmlReturn_t r = l.process_utilization(d.handle, nullptr, &n, d.last_seen_us);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE || (r == NVML_SUCCESS && n > 0)) {
      // A sample may arrive between the two calls; a count past any real GPU's is not trusted.
      util_buf_.resize(std::min<size_t>(n, kMaxProcessRows) + 8);
      n = unsigned(util_buf_.size());
      r = l.process_utilization(d.handle, util_buf_.data(), &n, d.last_seen_us);
    }
    if (r == NVML_SUCCESS) {
      n = std::min(n, unsigned(util_buf_.size()));
      std::sort(util_buf_.begin(), util_buf_.begin() + n,
                [](const auto& x, const auto& y) { return x.timeStamp < y.timeStamp; });
      for (unsigned int i = 0; i < n; ++i) {
        const auto& u = util_buf_[i];
        if (u.timeStamp <= d.last_seen_us && d.last_seen_us) continue;
        // NVML stamps samples with the CPU's wall clock in microseconds, taken to the poll's
        // clock; anything far from it is not on that clock, and the poll's time stands in.
        int64_t ts = int64_t(u.timeStamp) * 1000 - realtime_ahead_ns_.load();
        if (std::llabs(ts - wall_ns) > 60'000'000'000LL) ts = wall_ns;
        auto prev = d.last_pid_ns.find(u.pid);
        int64_t period = prev == d.last_pid_ns.end() ? poll_ns_ : ts - prev->second;
        d.last_pid_ns[u.pid] = ts;
        hal::DeviceSample s;
        s.ts_ns = ts;
        s.period_ns = clamp_period(period);
        s.source = "nvml";
        s.device = d.index;
        s.uuid = d.uuid;
        s.pid = u.pid;
        s.sm_util = double(std::min(u.smUtil, 100u));
        s.mem_util = double(std::min(u.memUtil, 100u));
        latest[u.pid] = out.size();
        out.push_back(std::move(s));
      }
      for (unsigned int i = 0; i < n; ++i)
        d.last_seen_us = std::max(d.last_seen_us, util_buf_[i].timeStamp);
      // Processes gone for a minute are forgotten (a long-running agent sees many).
      if (d.last_pid_ns.size() > kMaxProcessRows)
        std::erase_if(d.last_pid_ns,
                      [&](const auto& e) { return e.second < wall_ns - 60'000'000'000LL; });
    } else if (r != NVML_ERROR_NOT_FOUND) {
      ok(d, r, d.procs, wall_ns);
    }
  }
  if (slow && d.running && l.running_processes) {
    unsigned int n = 0;
    nvmlReturn_t r = l.running_processes(d.handle, &n, nullptr);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
      proc_buf_.resize(std::min<size_t>(n, kMaxProcessRows) + 8);
      n = unsigned(proc_buf_.size());
      r = l.running_processes(d.handle, &n, proc_buf_.data());
    } else if (r == NVML_SUCCESS) {
      n = 0;  // no process: nothing was written
    }
    if (r == NVML_SUCCESS) {
      n = std::min(n, unsigned(proc_buf_.size()));
      for (unsigned int i = 0; i < n; ++i) {
        const auto& p = proc_buf_[i];
        if (p.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE) continue;
        if (auto it = latest.find(p.pid); it != latest.end()) {
          out[it->second].mem_used = p.usedGpuMemory;
          continue;
        }
        hal::DeviceSample s;
        s.ts_ns = wall_ns;
        s.source = "nvml";
        s.device = d.index;
        s.uuid = d.uuid;
        s.pid = p.pid;
        s.mem_used = p.usedGpuMemory;
        out.push_back(std::move(s));
      }
    } else {
      ok(d, r, d.running, wall_ns);
    }
  }
}

// The figures that change slowly (memory, clocks, throttle reasons, power, temperature, ECC
// totals), read once a second: each is a driver call, and at 10 Hz on eight GPUs they were
// most of a poll's calls.
void NvmlSampler::slow_figures(Device& d, hal::DeviceSample& s, int64_t wall_ns) {
  NvmlLibrary& l = *lib_;
  if (d.memory) {
    nvmlMemory_t m{};
    if (ok(d, l.memory_info(d.handle, &m), d.memory, wall_ns)) {
      s.mem_used = m.used;
      s.mem_total = m.total;
    }
  }
  unsigned int v = 0;
  if (d.sm_clock && ok(d, l.clock_info(d.handle, NVML_CLOCK_SM, &v), d.sm_clock, wall_ns))
    s.sm_clock_mhz = v;
  if (d.mem_clock && ok(d, l.clock_info(d.handle, NVML_CLOCK_MEM, &v), d.mem_clock, wall_ns))
    s.mem_clock_mhz = v;
  unsigned long long bits = 0;
  if (d.reasons && ok(d, l.clocks_event_reasons(d.handle, &bits), d.reasons, wall_ns))
    s.throttle_reasons = bits;
  if (d.power && ok(d, l.power_usage(d.handle, &v), d.power, wall_ns)) s.power_mw = v;
  if (d.temperature &&
      ok(d, l.temperature(d.handle, NVML_TEMPERATURE_GPU, &v), d.temperature, wall_ns))
    s.temperature_c = int32_t(v);
  if (!d.ecc) return;
  unsigned long long unc = 0, cor = 0;
  if (!ok(d,
          l.total_ecc_errors(d.handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &unc),
          d.ecc, wall_ns) ||
      !ok(d,
          l.total_ecc_errors(d.handle, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &cor),
          d.ecc, wall_ns))
    return;
  s.ecc_uncorrected = unc;
  s.ecc_corrected = cor;
  // A rise between reads is a device event of its own (the event set may not deliver ECC
  // events, or may not be there).
  auto rose = [&](const char* kind, uint64_t was, uint64_t now, const char* what) {
    if (!d.ecc_known || now <= was) return;
    hal::DeviceEvent e;
    e.ts_ns = wall_ns;
    e.source = "nvml";
    e.device = d.index;
    e.uuid = d.uuid;
    e.kind = kind;
    e.code = int64_t(now - was);
    e.detail = std::to_string(now - was) + " " + what + " ECC error" + (now - was == 1 ? "" : "s") +
               " (volatile count now " + std::to_string(now) + ")";
    add_event(std::move(e));
  };
  rose("ecc_uncorrected", d.ecc_uncorrected, unc, "uncorrected");
  rose("ecc_corrected", d.ecc_corrected, cor, "corrected");
  d.ecc_known = true;
  d.ecc_uncorrected = unc;
  d.ecc_corrected = cor;
}

std::vector<hal::DeviceSample> NvmlSampler::poll(int64_t wall_ns, const std::vector<uint32_t>&) {
  std::vector<hal::DeviceSample> out;
  realtime_ahead_ns_ = realtime_ns() - wall_ns;
  // The slow figures on the first poll and then about once a second.
  bool slow = polls_++ % std::max<int64_t>(1, kSlowPeriodNs / std::max<int64_t>(1, poll_ns_)) == 0;
  for (Device& d : devices_) {
    if (d.lost) continue;
    hal::DeviceSample s;
    s.ts_ns = wall_ns;
    s.period_ns = clamp_period(d.last_poll_ns ? wall_ns - d.last_poll_ns : poll_ns_);
    d.last_poll_ns = wall_ns;
    s.source = "nvml";
    s.device = d.index;
    s.uuid = d.uuid;
    if (d.util) {
      nvmlUtilization_t u{};
      if (ok(d, lib_->utilization(d.handle, &u), d.util, wall_ns)) {
        s.sm_util = double(std::min(u.gpu, 100u));
        s.mem_util = double(std::min(u.memory, 100u));
      }
    }
    if (d.lost) continue;
    if (slow) slow_figures(d, s, wall_ns);
    out.push_back(std::move(s));
    per_process(d, wall_ns, out, slow);
  }
  return out;
}

}  // namespace ingero::backends::nvml

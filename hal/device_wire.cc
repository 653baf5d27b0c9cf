#include "hal/device_wire.h"

#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>

#include "hal/varint.h"

namespace ingero::hal::device_wire {
namespace {

void put_u(std::string& out, uint64_t v) { put_varint(out, v); }

bool get_u(std::string_view& in, uint64_t& v) { return get_varint(in, v); }

void put_double(std::string& out, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  put_u(out, bits);
}

bool get_double(std::string_view& in, double& d) {
  uint64_t bits;
  if (!get_u(in, bits)) return false;
  std::memcpy(&d, &bits, sizeof(bits));
  return true;
}

// A count of items each at least `min_bytes` long, at most `max`: never more than the bytes
// left could hold, nor more than any sampler sends, so a damaged count cannot ask for gigabytes
// (the items are decoded into structs many times their encoded size).
bool get_count(std::string_view& in, size_t& n, size_t min_bytes, size_t max) {
  uint64_t v;
  if (!get_u(in, v) || v > in.size() / min_bytes || v > max) return false;
  n = size_t(v);
  return true;
}

// The most of each a sampler sends at once: NVML's 64 GPUs a host with 4,096 processes each is
// 266,240 samples; names and figures a few dozen.
constexpr size_t kMaxSamples = 300'000, kMaxEvents = 65'536, kMaxTexts = 65'536,
                 kMaxPids = 1'000'000;
// The fewest bytes each item takes.
constexpr size_t kSampleBytes = 6, kEventBytes = 7;

void put_texts(std::string& out, const std::vector<std::string>& v) {
  put_u(out, v.size());
  for (const auto& s : v) put_text(out, s);
}

bool get_texts(std::string_view& in, std::vector<std::string>& v) {
  size_t n;
  if (!get_count(in, n, 1, kMaxTexts)) return false;
  v.resize(n);
  for (auto& s : v)
    if (!get_text(in, s)) return false;
  return true;
}

// The optional figures of a sample, in this order behind one presence bit each.
constexpr uint32_t kPid = 1 << 0, kSmUtil = 1 << 1, kMemUtil = 1 << 2, kMemUsed = 1 << 3,
                   kMemTotal = 1 << 4, kSmClock = 1 << 5, kMemClock = 1 << 6, kPower = 1 << 7,
                   kTemperature = 1 << 8, kThrottle = 1 << 9, kEccCorrected = 1 << 10,
                   kEccUncorrected = 1 << 11;

template <class T>
void put_opt(std::string& out, const std::optional<T>& v) {
  if (!v) return;
  if constexpr (std::is_same_v<T, double>)
    put_double(out, *v);
  else if constexpr (std::is_signed_v<T>)
    put_u(out, zigzag(*v));
  else
    put_u(out, uint64_t(*v));
}

template <class T>
bool get_opt(std::string_view& in, uint32_t bits, uint32_t bit, std::optional<T>& v) {
  if (!(bits & bit)) return true;
  if constexpr (std::is_same_v<T, double>) {
    double d;
    if (!get_double(in, d)) return false;
    v = d;
  } else {
    uint64_t u;
    if (!get_u(in, u)) return false;
    if constexpr (std::is_signed_v<T>) {
      int64_t x = unzigzag(u);
      if (!std::in_range<T>(x)) return false;  // a damaged figure, refused, not truncated
      v = T(x);
    } else {
      if (!std::in_range<T>(u)) return false;
      v = T(u);
    }
  }
  return true;
}

}  // namespace

void put_int(std::string& out, int64_t v) { put_u(out, zigzag(v)); }

bool get_int(std::string_view& in, int64_t& v) {
  uint64_t u;
  if (!get_u(in, u)) return false;
  v = unzigzag(u);
  return true;
}

void put_text(std::string& out, std::string_view s) {
  put_u(out, s.size());
  out.append(s);
}

bool get_text(std::string_view& in, std::string& s) {
  uint64_t n;
  if (!get_u(in, n) || n > in.size()) return false;
  s.assign(in.substr(0, size_t(n)));
  in.remove_prefix(size_t(n));
  return true;
}

void put_info(std::string& out, const DeviceSamplerInfo& info) {
  put_text(out, info.source);
  put_text(out, info.library);
  put_texts(out, info.devices);
  put_texts(out, info.figures);
  put_texts(out, info.absent);
  put_u(out, info.events ? 1 : 0);
}

bool get_info(std::string_view& in, DeviceSamplerInfo& info) {
  uint64_t events;
  if (!get_text(in, info.source) || !get_text(in, info.library) || !get_texts(in, info.devices) ||
      !get_texts(in, info.figures) || !get_texts(in, info.absent) || !get_u(in, events) ||
      events > 1)
    return false;
  info.events = events == 1;
  return true;
}

void put_samples(std::string& out, const std::vector<DeviceSample>& samples) {
  put_u(out, samples.size());
  for (const DeviceSample& s : samples) {
    put_int(out, s.ts_ns);
    put_int(out, s.period_ns);
    put_text(out, s.source);
    put_u(out, s.device);
    put_text(out, s.uuid);
    uint32_t bits = (s.pid ? kPid : 0) | (s.sm_util ? kSmUtil : 0) | (s.mem_util ? kMemUtil : 0) |
                    (s.mem_used ? kMemUsed : 0) | (s.mem_total ? kMemTotal : 0) |
                    (s.sm_clock_mhz ? kSmClock : 0) | (s.mem_clock_mhz ? kMemClock : 0) |
                    (s.power_mw ? kPower : 0) | (s.temperature_c ? kTemperature : 0) |
                    (s.throttle_reasons ? kThrottle : 0) | (s.ecc_corrected ? kEccCorrected : 0) |
                    (s.ecc_uncorrected ? kEccUncorrected : 0);
    put_u(out, bits);
    put_opt(out, s.pid);
    put_opt(out, s.sm_util);
    put_opt(out, s.mem_util);
    put_opt(out, s.mem_used);
    put_opt(out, s.mem_total);
    put_opt(out, s.sm_clock_mhz);
    put_opt(out, s.mem_clock_mhz);
    put_opt(out, s.power_mw);
    put_opt(out, s.temperature_c);
    put_opt(out, s.throttle_reasons);
    put_opt(out, s.ecc_corrected);
    put_opt(out, s.ecc_uncorrected);
  }
}

bool get_samples(std::string_view& in, std::vector<DeviceSample>& samples) {
  size_t n;
  if (!get_count(in, n, kSampleBytes, kMaxSamples)) return false;
  samples.clear();
  samples.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    DeviceSample s;
    uint64_t device, bits;
    if (!get_int(in, s.ts_ns) || !get_int(in, s.period_ns) || !get_text(in, s.source) ||
        !get_u(in, device) || device > UINT32_MAX || !get_text(in, s.uuid) || !get_u(in, bits) ||
        bits >= (uint64_t(kEccUncorrected) << 1))
      return false;
    s.device = uint32_t(device);
    auto b = uint32_t(bits);
    if (!get_opt(in, b, kPid, s.pid) || !get_opt(in, b, kSmUtil, s.sm_util) ||
        !get_opt(in, b, kMemUtil, s.mem_util) || !get_opt(in, b, kMemUsed, s.mem_used) ||
        !get_opt(in, b, kMemTotal, s.mem_total) || !get_opt(in, b, kSmClock, s.sm_clock_mhz) ||
        !get_opt(in, b, kMemClock, s.mem_clock_mhz) || !get_opt(in, b, kPower, s.power_mw) ||
        !get_opt(in, b, kTemperature, s.temperature_c) ||
        !get_opt(in, b, kThrottle, s.throttle_reasons) ||
        !get_opt(in, b, kEccCorrected, s.ecc_corrected) ||
        !get_opt(in, b, kEccUncorrected, s.ecc_uncorrected))
      return false;
    samples.push_back(std::move(s));
  }
  return true;
}

void put_events(std::string& out, const std::vector<DeviceEvent>& events) {
  put_u(out, events.size());
  for (const DeviceEvent& e : events) {
    put_int(out, e.ts_ns);
    put_text(out, e.source);
    put_u(out, e.device);
    put_text(out, e.uuid);
    put_text(out, e.kind);
    put_int(out, e.code);
    put_text(out, e.detail);
  }
}

bool get_events(std::string_view& in, std::vector<DeviceEvent>& events) {
  size_t n;
  if (!get_count(in, n, kEventBytes, kMaxEvents)) return false;
  events.clear();
  events.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    DeviceEvent e;
    uint64_t device;
    if (!get_int(in, e.ts_ns) || !get_text(in, e.source) || !get_u(in, device) ||
        device > UINT32_MAX || !get_text(in, e.uuid) || !get_text(in, e.kind) ||
        !get_int(in, e.code) || !get_text(in, e.detail))
      return false;
    e.device = uint32_t(device);
    events.push_back(std::move(e));
  }
  return true;
}

void put_pids(std::string& out, const std::vector<uint32_t>& pids) {
  put_u(out, pids.size());
  for (uint32_t p : pids) put_u(out, p);
}

bool get_pids(std::string_view& in, std::vector<uint32_t>& pids) {
  size_t n;
  if (!get_count(in, n, 1, kMaxPids)) return false;
  pids.resize(n);
  for (auto& p : pids) {
    uint64_t v;
    if (!get_u(in, v) || v > UINT32_MAX) return false;
    p = uint32_t(v);
  }
  return true;
}

}  // namespace ingero::hal::device_wire

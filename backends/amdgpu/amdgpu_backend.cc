#include "backends/amdgpu/amdgpu_backend.h"

#include <algorithm>
#include <set>

#include "backends/amdgpu/amdgpu_sysfs.h"

namespace ingero::backends {
namespace {

using namespace ingero::hal;

constexpr int64_t kFdRescanNs = 5'000'000'000;  // a process's fds looked at again
constexpr int64_t kMaxPeriodNs = 1'000'000'000;
constexpr int64_t kSlowPeriodNs = 1'000'000'000;  // VRAM, power, temperature, clocks

// Shader work: the engines whose busy time is the GPU's compute busy. Copies (dma) and video
// (dec, enc) are not.
bool shader_engine(const std::string& e) { return e == "gfx" || e == "compute"; }

class AmdgpuSampler final : public DeviceSampler {
 public:
  AmdgpuSampler(std::vector<amdgpu::Card> cards, const DeviceSamplerOptions& o)
      : cards_(std::move(cards)), procfs_root_(o.procfs_root), poll_ns_(o.poll_ns) {
    for (const auto& c : cards_) files_.push_back(std::make_unique<amdgpu::CardFiles>(c));
    info_.source = "amdgpu";
    info_.library = o.sysfs_root + "/class/drm";
    std::set<std::string> have;
    for (const auto& c : cards_) {
      info_.devices.push_back(std::to_string(c.index) + ": " +
                              (c.name.empty() ? "AMD GPU" : c.name) +
                              (c.uuid.empty() ? "" : " (" + c.uuid + ")"));
      amdgpu::CardReading r = amdgpu::read_card(c);
      if (r.busy) have.insert("utilisation");
      if (r.mem_busy) have.insert("memory utilisation");
      if (r.vram_used && r.vram_total) have.insert("memory");
      if (r.power_mw) have.insert("power");
      if (r.temperature_c) have.insert("temperature");
      if (r.sclk_mhz || r.mclk_mhz) have.insert("clocks");
    }
    for (const char* f :
         {"utilisation", "memory utilisation", "memory", "clocks", "power", "temperature"}) {
      if (have.count(f))
        info_.figures.emplace_back(f);
      else
        info_.absent.push_back(std::string(f) + " (not in sysfs)");
    }
    info_.figures.emplace_back(
        "per-process utilisation and memory where /proc/PID/fdinfo has "
        "drm-engine-* keys (kernel 6.x)");
    info_.absent.emplace_back("throttle reasons, ECC, Xid (no such sysfs files)");
  }

  const DeviceSamplerInfo& info() const override { return info_; }
  std::vector<DeviceEvent> take_events() override { return {}; }

  std::vector<DeviceSample> poll(int64_t wall, const std::vector<uint32_t>& pids) override {
    std::vector<DeviceSample> out;
    // VRAM, power, temperature and clocks on the first poll and then about once a second.
    bool slow =
        polls_++ % std::max<int64_t>(1, kSlowPeriodNs / std::max<int64_t>(1, poll_ns_)) == 0;
    for (size_t i = 0; i < cards_.size(); ++i) {
      const amdgpu::Card& c = cards_[i];
      amdgpu::CardReading r = amdgpu::read_card(*files_[i], slow);
      DeviceSample s;
      s.ts_ns = wall;
      s.period_ns = std::min(kMaxPeriodNs, last_poll_ ? wall - last_poll_ : poll_ns_);
      s.source = "amdgpu";
      s.device = c.index;
      s.uuid = c.uuid;
      s.sm_util = r.busy;
      s.mem_util = r.mem_busy;
      s.mem_used = r.vram_used;
      s.mem_total = r.vram_total;
      s.sm_clock_mhz = r.sclk_mhz;
      s.mem_clock_mhz = r.mclk_mhz;
      s.power_mw = r.power_mw;
      s.temperature_c = r.temperature_c;
      out.push_back(std::move(s));
    }
    last_poll_ = wall;
    std::map<uint32_t, Proc> kept;
    for (uint32_t pid : pids) {
      Proc& p = procs_[pid];
      std::vector<amdgpu::DrmClient> clients = read_process(pid, p, wall);
      process_samples(pid, p, clients, wall, out);
      kept[pid] = std::move(p);
    }
    procs_ = std::move(kept);  // processes no longer feeding a GPU are forgotten
    return out;
  }

 private:
  struct Proc {
    std::map<int, amdgpu::OpenFile> drm_fds;  // its DRM fds' fdinfo files, kept open
    int64_t rescan_at = 0;
    int64_t last_ns = 0;
    std::map<uint32_t, uint64_t> last_busy_ns;  // card -> shader busy ns, summed over clients
  };

  // The process's amdgpu DRM clients, one per client id: its fds listed again every
  // kFdRescanNs (or when one of its DRM fds went or changed), only its DRM fds read between.
  std::vector<amdgpu::DrmClient> read_process(uint32_t pid, Proc& p, int64_t wall) {
    std::map<std::pair<std::string, uint64_t>, amdgpu::DrmClient> by_client;
    bool stale = wall >= p.rescan_at;
    if (!stale)
      for (auto& [fd, file] : p.drm_fds) {
        auto text = file.read();
        auto c = text ? amdgpu::parse_fdinfo(*text) : std::nullopt;
        if (!c) {
          stale = true;  // closed, or the number now names another file
          break;
        }
        by_client.try_emplace({c->pdev, c->client_id}, std::move(*c));
      }
    if (stale) {
      by_client.clear();
      p.drm_fds.clear();
      std::string dir = procfs_root_ + "/" + std::to_string(pid) + "/fdinfo/";
      for (int fd : amdgpu::list_fds(procfs_root_, pid)) {
        amdgpu::OpenFile f(dir + std::to_string(fd));
        auto text = f.read();
        auto c = text ? amdgpu::parse_fdinfo(*text) : std::nullopt;
        if (!c) continue;
        p.drm_fds.emplace(fd, std::move(f));
        by_client.try_emplace({c->pdev, c->client_id}, std::move(*c));
      }
      p.rescan_at = wall + kFdRescanNs;
    }
    std::vector<amdgpu::DrmClient> out;
    for (auto& [k, c] : by_client) out.push_back(std::move(c));
    return out;
  }

  const amdgpu::Card* card_of(const std::string& pdev) const {
    for (const auto& c : cards_)
      if (!pdev.empty() && c.pci == pdev) return &c;
    return cards_.size() == 1 && pdev.empty() ? &cards_[0] : nullptr;
  }

  void process_samples(uint32_t pid, Proc& p, const std::vector<amdgpu::DrmClient>& clients,
                       int64_t wall, std::vector<DeviceSample>& out) {
    struct Acc {
      uint64_t busy_ns = 0;  // the busiest shader engine's cumulative time, summed over clients
      std::optional<uint64_t> vram;
    };
    std::map<uint32_t, Acc> by_card;
    for (const auto& cl : clients) {
      const amdgpu::Card* c = card_of(cl.pdev);
      if (!c) continue;
      Acc& a = by_card[c->index];
      uint64_t busiest = 0;
      for (const auto& [engine, ns] : cl.engine_ns)
        if (shader_engine(engine)) busiest = std::max(busiest, ns);
      a.busy_ns += busiest;
      if (cl.vram_bytes) a.vram = a.vram.value_or(0) + *cl.vram_bytes;
    }
    int64_t dt = p.last_ns ? wall - p.last_ns : 0;
    std::map<uint32_t, uint64_t> now;
    for (const auto& [index, a] : by_card) {
      now[index] = a.busy_ns;
      DeviceSample s;
      s.ts_ns = wall;
      s.source = "amdgpu";
      s.device = index;
      for (const auto& c : cards_)
        if (c.index == index) s.uuid = c.uuid;
      s.pid = pid;
      s.mem_used = a.vram;
      auto was = p.last_busy_ns.find(index);
      // Busy time is cumulative: a rate needs the previous reading (a client that closed may
      // take its time away: no rate then).
      if (dt > 0 && was != p.last_busy_ns.end() && a.busy_ns >= was->second) {
        s.period_ns = std::min(kMaxPeriodNs, dt);
        s.sm_util = std::min(100.0, 100.0 * double(a.busy_ns - was->second) / double(dt));
      }
      if (s.sm_util || s.mem_used) out.push_back(std::move(s));
    }
    p.last_busy_ns = std::move(now);
    p.last_ns = wall;
  }

  std::vector<amdgpu::Card> cards_;
  std::vector<std::unique_ptr<amdgpu::CardFiles>> files_;  // by card, open for the polls
  std::string procfs_root_;
  int64_t poll_ns_;
  int64_t last_poll_ = 0;
  uint64_t polls_ = 0;
  DeviceSamplerInfo info_;
  std::map<uint32_t, Proc> procs_;
};

class AmdgpuBackend final : public VendorBackend {
 public:
  std::string_view name() const override { return "amdgpu"; }
  std::vector<std::string_view> file_hints() const override { return {}; }
  std::vector<std::string> install_dirs(
      const std::function<std::string(const char*)>&) const override {
    return {};
  }
  std::vector<LibraryMatch> match(const MappedFile&) const override { return {}; }
  std::span<const ProbeSpec> probes(const LibraryMatch&) const override { return {}; }
  std::vector<std::span<const ProbeSpec>> tables() const override { return {}; }
  void decode(const RawCall&, const ProbeSpec&, Event&) const override {}

  Result<std::unique_ptr<DeviceSampler>> open_device_sampler(
      const DeviceSamplerOptions& o) const override {
    auto cards = amdgpu::find_cards(o.sysfs_root);
    if (cards.empty()) return make_error("no amdgpu card under " + o.sysfs_root + "/class/drm");
    return std::unique_ptr<DeviceSampler>(std::make_unique<AmdgpuSampler>(std::move(cards), o));
  }

  std::vector<CheckLine> check(const std::string& sysfs_root) const override {
    DeviceSamplerOptions o;
    o.sysfs_root = sysfs_root;
    auto s = open_device_sampler(o);
    if (!s)
      return {{"amdgpu", CheckLine::Status::kOptional, "no devices",
               s.error().message + ": no AMD GPU utilisation to read (not an error)", ""}};
    const DeviceSamplerInfo& i = (*s)->info();
    std::string detail, figures, absent;
    for (const auto& d : i.devices) detail += (detail.empty() ? "" : ", ") + d;
    for (const auto& f : i.figures) figures += (figures.empty() ? "" : ", ") + f;
    for (const auto& f : i.absent) absent += (absent.empty() ? "" : ", ") + f;
    detail += "; gives " + figures + (absent.empty() ? "" : "; absent: " + absent);
    return {{"amdgpu", CheckLine::Status::kPass,
             std::to_string(i.devices.size()) + " device" + (i.devices.size() == 1 ? "" : "s"),
             detail, ""}};
  }
};

}  // namespace

std::unique_ptr<VendorBackend> make_amdgpu_backend() { return std::make_unique<AmdgpuBackend>(); }

}  // namespace ingero::backends

#include "backends/amdgpu/amdgpu_sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace ingero::backends::amdgpu {
namespace {

// A small sysfs or procfs file, whole; nullopt when it cannot be opened or read.
std::optional<std::string> slurp(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) {
    out.append(buf, size_t(n));
    if (out.size() > (1u << 16)) break;
  }
  ::close(fd);
  if (n < 0) return std::nullopt;
  return out;
}

std::string first_line(const std::string& path) {
  auto s = slurp(path);
  if (!s) return "";
  return s->substr(0, s->find('\n'));
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') out.emplace_back(e->d_name);
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

OpenFile::OpenFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}

OpenFile::~OpenFile() {
  if (fd_ >= 0) ::close(fd_);
}

OpenFile& OpenFile::operator=(OpenFile&& o) noexcept {
  std::swap(fd_, o.fd_);
  return *this;
}

std::optional<std::string> OpenFile::read() {
  if (fd_ < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  off_t at = 0;
  ssize_t n;
  while ((n = ::pread(fd_, buf, sizeof(buf), at)) > 0) {
    out.append(buf, size_t(n));
    at += n;
    if (out.size() > (1u << 16)) break;
  }
  if (n < 0) return std::nullopt;
  return out;
}

std::optional<uint64_t> OpenFile::number() {
  auto s = read();
  if (!s) return std::nullopt;
  const char* p = s->c_str();
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (end == p || errno) return std::nullopt;
  return uint64_t(v);
}

CardFiles::CardFiles(const Card& c)
    : busy(c.dir + "/gpu_busy_percent"),
      mem_busy(c.dir + "/mem_busy_percent"),
      vram_used(c.dir + "/mem_info_vram_used"),
      vram_total(c.dir + "/mem_info_vram_total") {
  if (c.hwmon.empty()) return;
  // power1_average (older kernels, and dGPUs) or power1_input, in microwatts.
  power = OpenFile(c.hwmon + "/power1_average");
  if (!power.open()) power = OpenFile(c.hwmon + "/power1_input");
  temperature = OpenFile(c.hwmon + "/temp1_input");
  sclk = OpenFile(c.hwmon + "/freq1_input");
  mclk = OpenFile(c.hwmon + "/freq2_input");
}

CardReading read_card(CardFiles& f, bool slow) {
  CardReading r;
  if (auto v = f.busy.number()) r.busy = double(std::min<uint64_t>(*v, 100));
  if (auto v = f.mem_busy.number()) r.mem_busy = double(std::min<uint64_t>(*v, 100));
  if (!slow) return r;
  r.vram_used = f.vram_used.number();
  r.vram_total = f.vram_total.number();
  if (auto uw = f.power.number()) r.power_mw = uint32_t(*uw / 1000);
  if (auto mc = f.temperature.number()) r.temperature_c = int32_t(*mc / 1000);
  if (auto hz = f.sclk.number()) r.sclk_mhz = uint32_t(*hz / 1'000'000);
  if (auto hz = f.mclk.number()) r.mclk_mhz = uint32_t(*hz / 1'000'000);
  return r;
}

std::vector<Card> find_cards(const std::string& sysfs_root) {
  std::vector<Card> out;
  std::string base = sysfs_root + "/class/drm";
  for (const auto& name : entries(base)) {
    if (name.rfind("card", 0) != 0 || !all_digits(name.substr(4))) continue;
    Card c;
    c.index = uint32_t(std::stoul(name.substr(4)));
    c.dir = base + "/" + name + "/device";
    if (access((c.dir + "/gpu_busy_percent").c_str(), F_OK) != 0) continue;
    if (auto ev = slurp(c.dir + "/uevent")) {
      auto at = ev->find("PCI_SLOT_NAME=");
      if (at != std::string::npos) {
        at += 14;
        c.pci = ev->substr(at, ev->find('\n', at) - at);
      }
    }
    c.uuid = first_line(c.dir + "/unique_id");
    if (c.uuid.empty()) c.uuid = c.pci;
    c.name = first_line(c.dir + "/product_name");
    for (const auto& h : entries(c.dir + "/hwmon"))
      if (h.rfind("hwmon", 0) == 0) {
        c.hwmon = c.dir + "/hwmon/" + h;
        break;
      }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const Card& a, const Card& b) { return a.index < b.index; });
  return out;
}

CardReading read_card(const Card& c) {
  CardFiles f(c);
  return read_card(f);
}

std::vector<int> list_fds(const std::string& procfs_root, uint32_t pid) {
  std::vector<int> out;
  for (const auto& e : entries(procfs_root + "/" + std::to_string(pid) + "/fdinfo"))
    if (all_digits(e) && e.size() < 10) out.push_back(std::stoi(e));
  return out;
}

std::optional<DrmClient> parse_fdinfo(const std::string& text) {
  if (text.find("drm-driver:") == std::string::npos) return std::nullopt;
  DrmClient c;
  bool amdgpu = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (key == "drm-driver") {
      amdgpu = value == "amdgpu";
    } else if (key == "drm-pdev") {
      c.pdev = value;
    } else if (key == "drm-client-id") {
      c.client_id = strtoull(value.c_str(), nullptr, 10);
    } else if (key.rfind("drm-engine-", 0) == 0 && key.find("capacity") == std::string::npos) {
      c.engine_ns[key.substr(11)] = strtoull(value.c_str(), nullptr, 10);  // "123 ns"
    } else if (key == "drm-memory-vram" || key == "drm-resident-vram") {
      char* unit = nullptr;
      uint64_t v = strtoull(value.c_str(), &unit, 10);
      std::string u = unit ? std::string(unit) : "";
      u.erase(0, u.find_first_not_of(' '));
      uint64_t mult = u == "KiB" ? 1024 : u == "MiB" ? 1 << 20 : u == "GiB" ? 1ull << 30 : 1;
      // drm-resident-vram (newer kernels) wins over the older drm-memory-vram.
      if (key == "drm-resident-vram" || !c.vram_bytes) c.vram_bytes = v * mult;
    }
  }
  if (!amdgpu) return std::nullopt;
  return c;
}

std::vector<DrmClient> read_clients(const std::string& procfs_root, uint32_t pid,
                                    const std::vector<int>& fds, std::vector<int>* drm_fds) {
  std::map<std::pair<std::string, uint64_t>, DrmClient> by_client;
  std::string dir = procfs_root + "/" + std::to_string(pid) + "/fdinfo/";
  for (int fd : fds) {
    auto text = slurp(dir + std::to_string(fd));
    if (!text) continue;
    auto c = parse_fdinfo(*text);
    if (!c) continue;
    if (drm_fds) drm_fds->push_back(fd);
    by_client.try_emplace({c->pdev, c->client_id}, std::move(*c));
  }
  std::vector<DrmClient> out;
  for (auto& [k, c] : by_client) out.push_back(std::move(c));
  return out;
}

}  // namespace ingero::backends::amdgpu

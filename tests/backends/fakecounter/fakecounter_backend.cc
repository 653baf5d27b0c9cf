#include "tests/backends/fakecounter/fakecounter_backend.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace ingero::test {
namespace {

using namespace ingero::hal;
namespace fs = std::filesystem;

constexpr SqlView kViews[] = {
    {.name = "fakecounter_errors",
     .select = "SELECT timestamp, device, port, counter, value FROM device_counters\n"
               " WHERE backend = 'fakecounter' AND is_error = 1"},
};

std::string first_line(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

std::vector<fs::path> sorted(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<DevicePortSample> read_tree(const std::string& sysfs_root) {
  std::vector<DevicePortSample> out;
  for (const auto& dev : sorted(fs::path(sysfs_root) / "class/fakecounter"))
    for (const auto& port : sorted(dev / "ports")) {
      DevicePortSample s;
      s.device = dev.filename();
      s.port = uint32_t(std::stoul(port.filename()));
      s.attributes = {{"link", first_line(port / "link"), true},
                      {"state", first_line(port / "state")}};
      for (const auto& c : sorted(port / "counters")) {
        std::string name = c.filename(), v = first_line(c);
        if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) {
          s.unreadable.push_back(name);
          continue;
        }
        bool words = name == "rx_words";
        bool error = name.size() > 7 && name.ends_with("_errors");
        s.counters.push_back({name, name, "fake device counter " + name, std::stoull(v),
                              words ? 4u : 1u, words ? "bytes" : "events", error});
      }
      out.push_back(std::move(s));
    }
  return out;
}

class FakeCounterBackend final : public VendorBackend {
 public:
  std::string_view name() const override { return "fakecounter"; }
  std::vector<std::string_view> file_hints() const override { return {}; }
  std::vector<std::string> install_dirs(
      const std::function<std::string(const char*)>&) const override {
    return {};
  }
  std::vector<LibraryMatch> match(const MappedFile&) const override { return {}; }
  std::span<const ProbeSpec> probes(const LibraryMatch&) const override { return {}; }
  std::vector<std::span<const ProbeSpec>> tables() const override { return {}; }
  void decode(const RawCall&, const ProbeSpec&, Event&) const override {}

  std::vector<DevicePortSample> poll_counters(const std::string& sysfs_root) const override {
    return read_tree(sysfs_root);
  }
  std::vector<CheckLine> check(const std::string& sysfs_root) const override {
    auto ports = read_tree(sysfs_root);
    if (ports.empty())
      return {{"fakecounter", CheckLine::Status::kOptional, "no devices", "nothing to poll", ""}};
    size_t counters = 0;
    for (const auto& p : ports) counters += p.counters.size();
    return {{"fakecounter", CheckLine::Status::kPass, std::to_string(ports.size()) + " ports",
             std::to_string(counters) + " counters readable", ""}};
  }
  std::span<const SqlView> views() const override { return kViews; }
};

}  // namespace

std::unique_ptr<VendorBackend> make_fakecounter_backend() {
  return std::make_unique<FakeCounterBackend>();
}

}  // namespace ingero::test

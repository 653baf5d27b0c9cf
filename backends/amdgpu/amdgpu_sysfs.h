// amdgpu's figures as the kernel exposes them: per card under SYSFS/class/drm/cardN/device/
// (gpu_busy_percent, mem_busy_percent, mem_info_vram_used/total, hwmon power, temperature and
// clocks), per process under PROC/PID/fdinfo/FD (the DRM fdinfo keys of kernel 6.x:
// drm-engine-<engine> cumulative busy ns, drm-memory-vram / drm-resident-vram). Pure reading;
// the sampler (amdgpu_sampler.cc) turns cumulative figures into rates.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ingero::backends::amdgpu {

struct Card {
  uint32_t index = 0;  // N of cardN
  std::string dir;     // SYSFS/class/drm/cardN/device
  std::string pci;     // "0000:03:00.0" (PCI_SLOT_NAME), "" when unknown
  std::string uuid;    // unique_id where the card has one, else the PCI address
  std::string name;    // product_name, "" when absent
  std::string hwmon;   // its hwmon directory, "" when none
};

// Every amdgpu card (a cardN whose device has gpu_busy_percent), by index. Connectors
// (card0-DP-1) and other drivers' cards are skipped.
std::vector<Card> find_cards(const std::string& sysfs_root);

// A sysfs or procfs file kept open and read again from its start each time (sysfs attributes
// and procfs fdinfo regenerate on a read at offset 0): one pread a poll instead of an open, a
// read and a close. A file that cannot be opened stays absent.
class OpenFile {
 public:
  OpenFile() = default;
  explicit OpenFile(const std::string& path);
  ~OpenFile();
  OpenFile(OpenFile&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OpenFile& operator=(OpenFile&& o) noexcept;
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  bool open() const { return fd_ >= 0; }
  std::optional<std::string> read();  // the whole file (up to 64 KiB); nullopt on an error
  std::optional<uint64_t> number();   // its leading decimal number

 private:
  int fd_ = -1;
};

// A card's files, open for the sampler's polls.
struct CardFiles {
  explicit CardFiles(const struct Card& c);
  OpenFile busy, mem_busy, vram_used, vram_total, power, temperature, sclk, mclk;
};

struct CardReading {
  std::optional<double> busy, mem_busy;           // percent
  std::optional<uint64_t> vram_used, vram_total;  // bytes
  std::optional<uint32_t> power_mw, sclk_mhz, mclk_mhz;
  std::optional<int32_t> temperature_c;
};
CardReading read_card(const Card& c);  // opens and closes each file
// From the open files; with `slow` false only the busy percentages (the figures that change
// slowly are read once a second).
CardReading read_card(CardFiles& f, bool slow = true);

// One DRM client of a process as its fdinfo says.
struct DrmClient {
  std::string pdev;                           // drm-pdev: the card's PCI address
  uint64_t client_id = 0;                     // drm-client-id: dup'd fds of one client share it
  std::map<std::string, uint64_t> engine_ns;  // drm-engine-gfx etc., cumulative busy ns
  std::optional<uint64_t> vram_bytes;
};
// One fdinfo file's DRM client when it is amdgpu's ("drm-driver: amdgpu"), else nullopt.
std::optional<DrmClient> parse_fdinfo(const std::string& text);
// The amdgpu DRM clients among `fds` of PID (each read from PROC/PID/fdinfo/FD), one per
// client id. `drm_fds`, when given, receives the fds that were amdgpu DRM clients.
std::vector<DrmClient> read_clients(const std::string& procfs_root, uint32_t pid,
                                    const std::vector<int>& fds, std::vector<int>* drm_fds);
// Every fd of PID (PROC/PID/fdinfo), for the first look and the periodic re-scan.
std::vector<int> list_fds(const std::string& procfs_root, uint32_t pid);

}  // namespace ingero::backends::amdgpu

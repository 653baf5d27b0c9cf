#include "backends/rdma/rdma_backend.h"

#include <dirent.h>

#include <fstream>
#include <set>
#include <sstream>

namespace ingero::backends {
namespace {

using namespace ingero::hal;

// int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event):
// the event is written through the output pointer; event_type follows the 8-byte element
// union.
constexpr ProbeSpec kVerbsProbes[] = {
    {.symbol = "ibv_get_async_event",
     .kind = EventKind::kRdmaAsyncEvent,
     .args = {.return_read = read_at_reg(1, 16)},
     .fields = {{Field::kRdmaEvent, return_buf(8, 4)}, {Field::kFlags, return_buf(0, 8)}}},
};

// The table this backend wrote before device_counters existed, with its exact columns.
constexpr SqlView kViews[] = {
    {.name = "rdma_counters",
     .select = "SELECT id, node, session_id, timestamp, device, port,\n"
               "       coalesce(json_extract(attributes, '$.transport'), '') AS transport,\n"
               "       coalesce(json_extract(attributes, '$.state'), '') AS state,\n"
               "       coalesce(json_extract(attributes, '$.rate'), '') AS rate,\n"
               "       counter, value, base_value, unit, is_error\n"
               "  FROM device_counters WHERE backend = 'rdma'"},
};

class RdmaBackend final : public VendorBackend {
 public:
  explicit RdmaBackend(bool verbs) : verbs_(verbs) {}
  std::string_view name() const override { return "rdma"; }
  std::vector<std::string_view> file_hints() const override {
    if (!verbs_) return {};
    return {"libibverbs"};
  }
  std::vector<std::string> install_dirs(
      const std::function<std::string(const char*)>&) const override {
    if (!verbs_) return {};
    return {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"};
  }
  std::vector<LibraryMatch> match(const MappedFile& f) const override {
    if (verbs_ && basename_matches(f.basename, "libibverbs"))
      return {{.vendor = "rdma", .api = "ibverbs"}};
    return {};
  }
  std::span<const ProbeSpec> probes(const LibraryMatch&) const override { return kVerbsProbes; }
  std::vector<std::span<const ProbeSpec>> tables() const override { return {kVerbsProbes}; }
  std::vector<DevicePortSample> poll_counters(const std::string& sysfs_root) const override {
    std::vector<DevicePortSample> out;
    for (const auto& p : read_rdma_counters(sysfs_root)) out.push_back(to_device_sample(p));
    return out;
  }
  std::string_view device_event_name(std::string_view api, uint64_t type) const override {
    return api == "ibverbs" ? rdma_event_name(type) : std::string_view();
  }
  std::vector<CheckLine> check(const std::string& sysfs_root) const override;
  std::span<const SqlView> views() const override { return kViews; }
  void decode(const RawCall&, const ProbeSpec&, Event& ev) const override {
    if (ev.has_ret && ev.ret != 0) {
      // The call failed: nothing was written through the output pointer, and what was read
      // there (the stack's old bytes) names no event.
      ev.clear(Field::kRdmaEvent);
      ev.clear(Field::kFlags);
      ev.set(Field::kErrClass, uint64_t(ErrorClass::kOther));
      return;
    }
    if (auto t = ev.get(Field::kRdmaEvent)) {
      ev.set(Field::kFabricError, rdma_event_is_fabric_error(*t) ? 1 : 0);
      // The element union: a port event's is the 4-byte port_num (the union's other 4 bytes
      // are whatever the caller's buffer held); a device's fatal event has none.
      if (rdma_event_is_port_event(*t)) {
        if (auto e = ev.get(Field::kFlags)) ev.set(Field::kFlags, *e & 0xffffffffu);
      } else if (*t == 8) {  // IBV_EVENT_DEVICE_FATAL
        ev.clear(Field::kFlags);
      }
    }
  }

 private:
  bool verbs_;
};

std::string slurp(const std::string& path, bool* ok) {
  std::ifstream f(path);
  if (!f) {
    *ok = false;
    return "";
  }
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  *ok = true;
  return s;
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') out.emplace_back(e->d_name);
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void read_counter_dir(const std::string& dir, std::map<std::string, uint64_t>& out,
                      std::vector<std::string>& unreadable, const std::string& prefix) {
  for (const auto& name : list_dir(dir)) {
    bool ok = false;
    std::string v = slurp(dir + "/" + name, &ok);
    if (!ok || v.empty() || v.find_first_not_of("0123456789") != std::string::npos) {
      unreadable.push_back(prefix + name);
      continue;
    }
    out[name] = std::stoull(v);
  }
}

}  // namespace

std::vector<CheckLine> RdmaBackend::check(const std::string& sysfs_root) const {
  auto ports = read_rdma_counters(sysfs_root);
  if (ports.empty())
    return {{"infiniband", CheckLine::Status::kOptional, "no devices",
             "no InfiniBand/RoCE HCA: RDMA counters are not collected (not an error)", ""}};
  std::set<std::string> devs;
  size_t counters = 0, unreadable = 0;
  std::string list;
  for (const auto& p : ports) {
    devs.insert(p.device);
    counters += p.counters.size() + p.hw_counters.size();
    unreadable += p.unreadable.size();
    list += (list.empty() ? "" : ", ") + p.device + "/" + std::to_string(p.port) + " " +
            p.transport + " " + p.state;
  }
  return {{"infiniband", unreadable ? CheckLine::Status::kOptional : CheckLine::Status::kPass,
           std::to_string(devs.size()) + " devices, " + std::to_string(ports.size()) + " ports",
           list + "; " + std::to_string(counters) + " counters readable" +
               (unreadable ? ", " + std::to_string(unreadable) + " unreadable" : ""),
           unreadable ? "run as root to read every counter" : ""}};
}

hal::DevicePortSample to_device_sample(const RdmaPortSample& p) {
  hal::DevicePortSample out;
  out.device = p.device;
  out.port = p.port;
  out.attributes = {{"transport", p.transport, true}, {"state", p.state}, {"rate", p.rate}};
  out.unreadable = p.unreadable;
  auto add = [&](const std::string& raw, uint64_t v, bool hw) {
    auto [factor, unit] = rdma_counter_unit(raw);
    hal::CounterSample c;
    c.counter = (hw ? "hw_counters/" : "") + raw;
    c.metric = (hw ? "hw_" : "") + raw;
    c.help = "InfiniBand/RoCE port counter " + raw +
             (unit == "bytes" ? " (bytes; sysfs counts 4-byte words)" : "");
    c.value = v;
    c.factor = factor;
    c.unit = std::string(unit);
    c.is_error = rdma_counter_is_error(raw);
    out.counters.push_back(std::move(c));
  };
  for (const auto& [n, v] : p.counters) add(n, v, false);
  for (const auto& [n, v] : p.hw_counters) add(n, v, true);
  return out;
}

std::unique_ptr<VendorBackend> make_rdma_backend(bool verbs) {
  return std::make_unique<RdmaBackend>(verbs);
}

std::string_view rdma_event_name(uint64_t t) {
  static constexpr std::string_view kNames[] = {"IBV_EVENT_CQ_ERR",
                                                "IBV_EVENT_QP_FATAL",
                                                "IBV_EVENT_QP_REQ_ERR",
                                                "IBV_EVENT_QP_ACCESS_ERR",
                                                "IBV_EVENT_COMM_EST",
                                                "IBV_EVENT_SQ_DRAINED",
                                                "IBV_EVENT_PATH_MIG",
                                                "IBV_EVENT_PATH_MIG_ERR",
                                                "IBV_EVENT_DEVICE_FATAL",
                                                "IBV_EVENT_PORT_ACTIVE",
                                                "IBV_EVENT_PORT_ERR",
                                                "IBV_EVENT_LID_CHANGE",
                                                "IBV_EVENT_PKEY_CHANGE",
                                                "IBV_EVENT_SM_CHANGE",
                                                "IBV_EVENT_SRQ_ERR",
                                                "IBV_EVENT_SRQ_LIMIT_REACHED",
                                                "IBV_EVENT_QP_LAST_WQE_REACHED",
                                                "IBV_EVENT_CLIENT_REREGISTER",
                                                "IBV_EVENT_GID_CHANGE",
                                                "IBV_EVENT_WQ_FATAL"};
  return t < std::size(kNames) ? kNames[t] : "IBV_EVENT_UNKNOWN";
}

bool rdma_event_is_fabric_error(uint64_t t) {
  switch (t) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 7:
    case 8:
    case 10:
    case 14:
    case 19:
      return true;
    default:
      return false;
  }
}

bool rdma_event_is_port_event(uint64_t t) { return (t >= 9 && t <= 13) || t == 17 || t == 18; }

std::pair<uint64_t, std::string_view> rdma_counter_unit(std::string_view c) {
  if (c.substr(0, 12) == "hw_counters/") c.remove_prefix(12);
  if (c == "port_rcv_data" || c == "port_xmit_data") return {4, "bytes"};  // 4-byte words
  if (c.find("pkts") != std::string_view::npos || c.find("packets") != std::string_view::npos)
    return {1, "packets"};
  return {1, "events"};
}

bool rdma_counter_is_error(std::string_view c) {
  if (c.substr(0, 12) == "hw_counters/") c.remove_prefix(12);
  static const std::set<std::string_view> kErrors = {"symbol_error",
                                                     "port_rcv_errors",
                                                     "port_rcv_remote_physical_errors",
                                                     "port_rcv_switch_relay_errors",
                                                     "link_error_recovery",
                                                     "link_downed",
                                                     "port_xmit_discards",
                                                     "port_xmit_constraint_errors",
                                                     "port_rcv_constraint_errors",
                                                     "local_link_integrity_errors",
                                                     "excessive_buffer_overrun_errors",
                                                     "VL15_dropped",
                                                     "port_xmit_wait",
                                                     "out_of_buffer",
                                                     "out_of_sequence",
                                                     "packet_seq_err",
                                                     "local_ack_timeout_err",
                                                     "rnr_nak_retry_err",
                                                     "implied_nak_seq_err",
                                                     "duplicate_request"};
  return kErrors.count(c) > 0;
}

std::vector<RdmaPortSample> read_rdma_counters(const std::string& sysfs_root) {
  std::vector<RdmaPortSample> out;
  std::string base = sysfs_root + "/class/infiniband";
  for (const auto& dev : list_dir(base)) {
    std::string ports = base + "/" + dev + "/ports";
    for (const auto& p : list_dir(ports)) {
      if (p.find_first_not_of("0123456789") != std::string::npos) continue;
      RdmaPortSample s;
      s.device = dev;
      s.port = uint32_t(std::stoul(p));
      std::string pd = ports + "/" + p;
      bool ok = false;
      s.transport = slurp(pd + "/link_layer", &ok);
      if (!ok || s.transport.empty()) s.transport = "InfiniBand";  // link_layer appeared in 2.6.38
      s.state = slurp(pd + "/state", &ok);
      s.rate = slurp(pd + "/rate", &ok);
      read_counter_dir(pd + "/counters", s.counters, s.unreadable, "");
      read_counter_dir(pd + "/hw_counters", s.hw_counters, s.unreadable, "hw_counters/");
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace ingero::backends

#include "serve/export/pprof.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "hal/utf8.h"
#include "profile.pb.h"

namespace ingero::serve::pprof {
namespace {

namespace pp = perftools::profiles;

// Each mapping gets its own 1 TiB of a made-up address space, so that an address names one
// mapping and file offset: address = start + file offset.
constexpr uint64_t kMappingSpan = uint64_t(1) << 40;

class Strings {
 public:
  explicit Strings(pp::Profile* p) : p_(p) { id(""); }
  int64_t id(const std::string& s) {
    auto [it, fresh] = ids_.try_emplace(s, int64_t(ids_.size()));
    if (fresh) p_->add_string_table(hal::valid_utf8(s));  // proto3 strings: UTF-8 only
    return it->second;
  }

 private:
  pp::Profile* p_;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace

bool is_launch(hal::EventKind k) {
  return k == hal::EventKind::kLaunch || k == hal::EventKind::kGraphLaunch;
}

bool waits_for_gpu(const hal::Event& e) {
  if (e.kind == hal::EventKind::kSync) return true;
  return e.kind == hal::EventKind::kMemcpy &&
         e.get_or(hal::Field::kDirection, 99) == uint64_t(hal::CopyDirection::kDeviceToHost);
}

ProfileBuilder::ProfileBuilder(StackFn stacks, Libraries libraries)
    : stacks_(std::move(stacks)), libraries_(std::move(libraries)) {}

uint64_t ProfileBuilder::mapping(const std::string& file, const std::string& build_id) {
  auto [it, fresh] = mapping_ids_.try_emplace({file, build_id}, mappings_.size() + 1);
  if (fresh) mappings_.push_back({file, build_id});
  return it->second;
}

uint64_t ProfileBuilder::function(const std::string& name, const std::string& file) {
  auto [it, fresh] = function_ids_.try_emplace({name, file}, functions_.size() + 1);
  if (fresh) functions_.emplace_back(name, file);
  return it->second;
}

uint64_t ProfileBuilder::frame_location(const Frame& f) {
  auto key = std::make_tuple(f.python, f.module, f.build_id,
                             f.module_offset ? int64_t(*f.module_offset) : int64_t(-1), f.function,
                             f.file, f.line);
  auto it = frame_ids_.find(key);
  if (it != frame_ids_.end()) return it->second;
  LocationRow loc;
  if (!f.python && !f.module.empty()) {
    loc.mapping = mapping(f.module, f.build_id);
    loc.address = (loc.mapping - 1) * kMappingSpan + f.module_offset.value_or(0);
  }
  if (!f.function.empty()) {
    loc.function = function(f.function, f.file);
    loc.line = f.line;
    if (loc.mapping) {
      MappingRow& m = mappings_[loc.mapping - 1];
      m.functions = true;
      m.filenames |= !f.file.empty();
      m.lines |= f.line > 0;
    }
  }
  locations_.push_back(loc);
  return frame_ids_[key] = locations_.size();
}

uint64_t ProfileBuilder::op_location(std::string_view op, std::string_view library,
                                     std::string_view api) {
  std::string path(library), build_id;
  if (path.empty()) {
    if (auto it = libraries_.by_api.find(std::string(api)); it != libraries_.by_api.end())
      std::tie(path, build_id) = it->second;
  } else if (auto b = libraries_.build_ids.find(path); b != libraries_.build_ids.end()) {
    build_id = b->second;
  }
  auto [it, fresh] = op_ids_.try_emplace({std::string(op), path}, locations_.size() + 1);
  if (!fresh) return it->second;
  LocationRow loc;
  if (!path.empty()) {
    loc.mapping = mapping(path, build_id);
    loc.address = (loc.mapping - 1) * kMappingSpan;
    mappings_[loc.mapping - 1].functions = true;
  }
  loc.function = function(std::string(op), "");
  locations_.push_back(loc);
  return it->second;
}

const std::vector<uint64_t>& ProfileBuilder::stack_locations(uint64_t stack_id) {
  auto it = stack_cache_.find(stack_id);
  if (it != stack_cache_.end()) return it->second;
  std::vector<uint64_t> ids;
  uint64_t outermost = 0;
  if (stack_id)
    for (const Frame& f : stacks_(stack_id)) {
      ids.push_back(frame_location(f));
      if (uint64_t m = locations_[ids.back() - 1].mapping) outermost = m;
    }
  if (outermost) ++mappings_[outermost - 1].outermost;
  return stack_cache_.emplace(stack_id, std::move(ids)).first->second;
}

void ProfileBuilder::add(std::vector<uint64_t> locations, uint32_t pid, uint32_t tid,
                         std::string_view comm, const std::string& node, const Values& v) {
  Key k{std::move(locations), pid, tid, std::string(comm), node_label_ ? node : std::string()};
  Values& into = samples_[std::move(k)];
  for (int i = 0; i < kSampleTypes; ++i) {
    into[i] += v[i];
    totals_.values[i] += v[i];
  }
}

void ProfileBuilder::add_call(const hal::Event& e, const std::string& node) {
  Values v{};
  v[kGpuApi] = int64_t(e.dur_ns);
  if (waits_for_gpu(e)) v[kGpuWait] = int64_t(e.dur_ns);
  if (is_launch(e.kind)) v[kLaunches] = 1;
  std::vector<uint64_t> locs = {op_location(e.op, e.library, e.api)};
  const auto& below = stack_locations(e.stack_id);
  locs.insert(locs.end(), below.begin(), below.end());
  add(std::move(locs), e.pid, e.tid, e.comm_view(), node, v);
  ++totals_.calls;
}

void ProfileBuilder::add_run(const engine::CallRun& r, const std::string& node) {
  Values v{};
  v[kGpuApi] = int64_t(r.sum_ns);
  if (is_launch(r.kind)) v[kLaunches] = int64_t(r.calls);
  std::vector<uint64_t> locs = {op_location(r.op, r.library, r.api)};
  const auto& below = stack_locations(r.stack_id);
  locs.insert(locs.end(), below.begin(), below.end());
  std::string_view comm = r.comm_view();
  add(std::move(locs), r.pid, r.tid, comm, node, v);
  totals_.calls += r.calls;
}

void ProfileBuilder::add_cpu_sample(const engine::CpuSample& s, uint64_t period_ns,
                                    std::string_view comm, const std::string& node) {
  Values v{};
  v[kCpu] = int64_t(period_ns);
  std::vector<uint64_t> locs = stack_locations(s.stack_id);
  add(std::move(locs), s.pid, s.tid, comm, node, v);
  ++totals_.cpu_samples;
}

std::string ProfileBuilder::serialize() const {
  pp::Profile p;
  Strings str(&p);
  const char* types[kSampleTypes][2] = {{"cpu", "nanoseconds"},
                                        {"gpu_wait", "nanoseconds"},
                                        {"launches", "count"},
                                        {"gpu_api", "nanoseconds"}};
  for (auto& t : types) {
    auto* vt = p.add_sample_type();
    vt->set_type(str.id(t[0]));
    vt->set_unit(str.id(t[1]));
  }
  p.set_default_sample_type(str.id("gpu_wait"));
  p.mutable_period_type()->set_type(str.id("cpu"));
  p.mutable_period_type()->set_unit(str.id("nanoseconds"));
  p.set_period(int64_t(period_ns_));
  p.set_time_nanos(start_ns_);
  p.set_duration_nanos(end_ns_ > start_ns_ ? end_ns_ - start_ns_ : 0);
  for (const auto& c : comments_) p.add_comment(str.id(c));
  // Readers take the first mapping for the main binary: the one most stacks start in (the
  // program's entry), ids unchanged.
  std::vector<size_t> order(mappings_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return mappings_[a].outermost > mappings_[b].outermost;
  });
  for (size_t i : order) {
    const MappingRow& m = mappings_[i];
    auto* pm = p.add_mapping();
    pm->set_id(i + 1);
    pm->set_memory_start(i * kMappingSpan);
    pm->set_memory_limit((i + 1) * kMappingSpan);
    pm->set_file_offset(0);
    pm->set_filename(str.id(m.file));
    pm->set_build_id(str.id(m.build_id));
    pm->set_has_functions(m.functions);
    pm->set_has_filenames(m.filenames);
    pm->set_has_line_numbers(m.lines);
  }
  for (size_t i = 0; i < functions_.size(); ++i) {
    auto* f = p.add_function();
    f->set_id(i + 1);
    f->set_name(str.id(functions_[i].first));
    f->set_system_name(str.id(functions_[i].first));
    f->set_filename(str.id(functions_[i].second));
  }
  for (size_t i = 0; i < locations_.size(); ++i) {
    const LocationRow& l = locations_[i];
    auto* pl = p.add_location();
    pl->set_id(i + 1);
    pl->set_mapping_id(l.mapping);
    pl->set_address(l.address);
    if (l.function) {
      auto* line = pl->add_line();
      line->set_function_id(l.function);
      line->set_line(l.line);
    }
  }
  const int64_t k_pid = str.id("pid"), k_tid = str.id("tid"), k_comm = str.id("comm"),
                k_node = str.id("node");
  for (const auto& [k, v] : samples_) {
    auto* s = p.add_sample();
    for (uint64_t id : k.locations) s->add_location_id(id);
    for (int64_t x : v) s->add_value(x);
    auto* l = s->add_label();
    l->set_key(k_pid);
    l->set_num(k.pid);
    l = s->add_label();
    l->set_key(k_tid);
    l->set_num(k.tid);
    if (!k.comm.empty()) {
      l = s->add_label();
      l->set_key(k_comm);
      l->set_str(str.id(k.comm));
    }
    if (node_label_ && !k.node.empty()) {
      l = s->add_label();
      l->set_key(k_node);
      l->set_str(str.id(k.node));
    }
  }
  return p.SerializeAsString();
}

void read_profile(engine::TraceSource& source, const Reading& reading, ProfileBuilder& out) {
  std::map<uint32_t, engine::ProcessInfo> names = source.processes();
  for (const auto& [node, w] : reading.windows) {
    source.call_runs(
        w, [&](const hal::Event& e) { out.add_call(e, node); },
        [&](const engine::CallRun& r) { out.add_run(r, node); });
    if (!source.has_cpu_samples()) continue;
    source.cpu_samples(w, [&](const engine::CpuSample& s) {
      auto it = names.find(s.pid);
      out.add_cpu_sample(s, reading.cpu_period_ns(node, s.ts_ns),
                         it == names.end() ? std::string_view() : std::string_view(it->second.name),
                         node);
    });
  }
}

}  // namespace ingero::serve::pprof

#include "store/call_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace ingero::store {
namespace {

// Flags of one encoded call.
constexpr uint8_t kHasRet = 1, kUnfinished = 2, kPeerComm = 4, kOffCpu = 8, kCgroup = 16;

void put(std::vector<uint8_t>& b, uint64_t v) {
  while (v >= 0x80) {
    b.push_back(uint8_t(v) | 0x80);
    v >>= 7;
  }
  b.push_back(uint8_t(v));
}

uint64_t zigzag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
int64_t unzigzag(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }

const uint8_t* get(const uint8_t* p, uint64_t& v) {
  uint64_t out = 0;
  for (unsigned shift = 0;; shift += 7) {
    uint8_t b = *p++;
    out |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  v = out;
  return p;
}

}  // namespace

uint32_t CallCache::name_index(std::string_view vendor, std::string_view api, std::string_view op,
                               hal::EventKind kind) {
  auto& ids = name_ids_[op.data()];
  for (uint32_t i : ids) {
    const Names& n = names_[i];
    if (n.vendor == vendor && n.api == api && n.op.size() == op.size() && n.kind == kind) return i;
  }
  names_.push_back({vendor, api, op, kind});
  ids.push_back(uint32_t(names_.size() - 1));
  return ids.back();
}

uint32_t CallCache::comm_index(std::string_view comm) {
  auto [it, fresh] = comm_ids_.try_emplace(std::string(comm), uint32_t(comms_.size()));
  if (fresh) comms_.emplace_back(comm);
  return it->second;
}

uint32_t CallCache::stack_index(uint64_t stack) {
  auto [it, fresh] = stack_ids_.try_emplace(stack, uint32_t(stacks_.size()));
  if (fresh) stacks_.push_back(stack);
  return it->second;
}

bool CallCache::add(const hal::Event& e) {
  std::vector<uint8_t>& buf_ = one_;
  buf_.clear();
  uint8_t flags = (e.has_ret ? kHasRet : 0) | (e.unfinished ? kUnfinished : 0) |
                  (e.peer_comm[0] ? kPeerComm : 0) |
                  (e.off_cpu_ns || e.preempts || e.switches ? kOffCpu : 0) |
                  (e.cgroup_id ? kCgroup : 0);
  buf_.push_back(flags);
  put(buf_, zigzag(int64_t(e.ts_ns - last_ts_)));
  last_ts_ = e.ts_ns;
  put(buf_, e.dur_ns);
  put(buf_, e.pid);
  put(buf_, e.tid);
  put(buf_, name_index(e.vendor, e.api, e.op, e.kind));
  put(buf_, comm_index(e.comm_view()));
  put(buf_, stack_index(e.stack_id));
  if (flags & kHasRet) put(buf_, zigzag(e.ret));
  if (flags & kPeerComm) put(buf_, comm_index(e.peer_comm_view()));
  if (flags & kOffCpu) {
    put(buf_, e.off_cpu_ns);
    put(buf_, e.preempts);
    put(buf_, e.switches);
  }
  if (flags & kCgroup) put(buf_, e.cgroup_id);
  put(buf_, e.present);
  for (uint64_t m = e.present; m; m &= m - 1) put(buf_, e.fields[size_t(std::countr_zero(m))]);
  if (!append()) return false;
  ++calls_;
  return true;
}

bool CallCache::add_run(const engine::CallRun& r) {
  std::vector<uint8_t>& b = one_;
  b.clear();
  b.push_back(kRunFlag | (r.cgroup_id ? kCgroup : 0));
  put(b, zigzag(r.ts_ns - int64_t(last_ts_)));
  last_ts_ = uint64_t(r.ts_ns);
  put(b, r.span_ns);
  put(b, r.pid);
  put(b, r.tid);
  put(b, name_index(r.vendor, r.api, r.op, r.kind));
  std::string_view comm(r.comm.data(), strnlen(r.comm.data(), r.comm.size()));
  put(b, comm_index(comm));
  put(b, stack_index(r.stack_id));
  put(b, r.calls);
  put(b, r.sum_ns);
  put(b, r.min_ns);
  put(b, r.max_ns);
  put(b, r.nested);
  put(b, r.stream ? *r.stream + 1 : 0);
  put(b, r.device ? *r.device + 1 : 0);
  if (r.cgroup_id) put(b, r.cgroup_id);
  if (!append()) return false;
  calls_ += r.calls;
  return true;
}

bool CallCache::append() {
  if (chunks_.empty() || chunks_.back().size() + one_.size() > kChunkBytes) {
    if (bytes() + kChunkBytes > max_bytes_) return false;
    chunks_.emplace_back().reserve(kChunkBytes);
  }
  chunks_.back().insert(chunks_.back().end(), one_.begin(), one_.end());
  return true;
}

const uint8_t* CallCache::decode(const uint8_t* p, uint64_t& ts, hal::Event& e) const {
  uint8_t flags = *p++;
  uint64_t v = 0;
  e.fields = {};
  e.present = 0;
  p = get(p, v);
  ts += uint64_t(unzigzag(v));
  e.ts_ns = ts;
  p = get(p, e.dur_ns);
  p = get(p, v);
  e.pid = uint32_t(v);
  p = get(p, v);
  e.tid = uint32_t(v);
  p = get(p, v);
  const Names& n = names_[v];
  e.vendor = n.vendor;
  e.api = n.api;
  e.op = n.op;
  e.kind = n.kind;
  p = get(p, v);
  e.set_comm(comms_[v]);
  p = get(p, v);
  e.stack_id = stacks_[v];
  e.has_ret = flags & kHasRet;
  e.ret = 0;
  if (e.has_ret) {
    p = get(p, v);
    e.ret = unzigzag(v);
  }
  e.unfinished = flags & kUnfinished;
  e.peer_comm = {};
  if (flags & kPeerComm) {
    p = get(p, v);
    e.set_peer_comm(comms_[v]);
  }
  e.off_cpu_ns = 0;
  e.preempts = e.switches = 0;
  if (flags & kOffCpu) {
    p = get(p, e.off_cpu_ns);
    p = get(p, v);
    e.preempts = uint32_t(v);
    p = get(p, v);
    e.switches = uint32_t(v);
  }
  e.cgroup_id = 0;
  if (flags & kCgroup) p = get(p, e.cgroup_id);
  uint64_t present = 0;
  p = get(p, present);
  for (uint64_t m = present; m; m &= m - 1) {
    p = get(p, v);
    e.set(static_cast<hal::Field>(std::countr_zero(m)), v);
  }
  return p;
}

const uint8_t* CallCache::decode_run(const uint8_t* p, uint64_t& ts, engine::CallRun& r) const {
  uint8_t flags = *p++;
  uint64_t v = 0;
  p = get(p, v);
  ts += uint64_t(unzigzag(v));
  r.ts_ns = int64_t(ts);
  p = get(p, r.span_ns);
  p = get(p, v);
  r.pid = uint32_t(v);
  p = get(p, v);
  r.tid = uint32_t(v);
  p = get(p, v);
  const Names& n = names_[v];
  r.vendor = n.vendor;
  r.api = n.api;
  r.op = n.op;
  r.kind = n.kind;
  r.library = {};
  p = get(p, v);
  r.comm = {};
  const std::string& comm = comms_[v];
  std::copy_n(comm.data(), std::min(comm.size(), r.comm.size() - 1), r.comm.data());
  p = get(p, v);
  r.stack_id = stacks_[v];
  p = get(p, r.calls);
  p = get(p, r.sum_ns);
  p = get(p, r.min_ns);
  p = get(p, r.max_ns);
  p = get(p, r.nested);
  p = get(p, v);
  r.stream = v ? std::optional<uint64_t>(v - 1) : std::nullopt;
  p = get(p, v);
  r.device = v ? std::optional<uint64_t>(v - 1) : std::nullopt;
  r.cgroup_id = 0;
  if (flags & kCgroup) p = get(p, r.cgroup_id);
  return p;
}

size_t CallCache::bytes() const {
  return chunks_.size() * kChunkBytes + comms_.size() * 48 + stacks_.size() * 40 +
         names_.size() * 64;
}

void CallCache::clear() {
  std::vector<std::vector<uint8_t>>().swap(chunks_);
  calls_ = 0;
  last_ts_ = 0;
  names_.clear();
  name_ids_.clear();
  comms_.clear();
  comm_ids_.clear();
  stacks_.clear();
  stack_ids_.clear();
}

}  // namespace ingero::store

#include "store/call_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "hal/memory.h"
#include "hal/varint.h"

namespace ingero::store {
namespace {

// Flags of one encoded call, in its first byte: it has a result; which is not 0 (it follows).
constexpr uint8_t kHasRet = 1, kNonZeroRet = 2;
// In the second byte, there where the first has kRare.
constexpr uint8_t kUnfinished = 1, kPeerComm = 2, kOffCpu = 4, kCgroup = 8;

using hal::put_varint;
using hal::unzigzag;
using hal::zigzag;

const uint8_t* get(const uint8_t* p, uint64_t& v) {
  if (*p < 0x80) {  // most are one byte: indexes, small counts
    v = *p;
    return p + 1;
  }
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
  // The last call's, compared by address: a loop's calls of one op come in a row.
  if (last_name_ < names_.size()) {
    const Names& n = names_[last_name_];
    if (n.op.data() == op.data() && n.op.size() == op.size() && n.api.data() == api.data() &&
        n.api.size() == api.size() && n.vendor.data() == vendor.data() &&
        n.vendor.size() == vendor.size() && n.kind == kind)
      return last_name_;
  }
  auto& ids = name_ids_[op.data()];
  for (uint32_t i : ids) {
    const Names& n = names_[i];
    if (n.vendor == vendor && n.api == api && n.op.size() == op.size() && n.kind == kind)
      return last_name_ = i;
  }
  names_.push_back({vendor, api, op, kind});
  ids.push_back(uint32_t(names_.size() - 1));
  return last_name_ = ids.back();
}

uint32_t CallCache::comm_index(std::string_view comm) {
  // A thread's calls come in a row, and its name with them: no string made, nothing hashed.
  if (last_comm_ < comms_.size() && comms_[last_comm_] == comm) return last_comm_;
  auto [it, fresh] = comm_ids_.try_emplace(std::string(comm), uint32_t(comms_.size()));
  if (fresh) comms_.emplace_back(comm);
  last_comm_ = it->second;
  return it->second;
}

uint32_t CallCache::funcs_index(std::string_view funcs) {
  auto [it, fresh] = func_ids_.try_emplace(funcs, uint32_t(funcs_.size()));
  if (fresh) funcs_.push_back(funcs);
  return it->second;
}

uint32_t CallCache::stack_index(uint64_t stack) {
  auto [it, fresh] = stack_ids_.try_emplace(stack, uint32_t(stacks_.size()));
  if (fresh) stacks_.push_back(stack);
  return it->second;
}

bool CallCache::add(const hal::Event& e) {
  if (!room_for(e.pid, e.tid)) return false;
  Item& b = one_;
  uint8_t rare = (e.unfinished ? kUnfinished : 0) | (e.peer_comm[0] ? kPeerComm : 0) |
                 (e.off_cpu_ns || e.preempts || e.switches ? kOffCpu : 0) |
                 (e.cgroup_id ? kCgroup : 0);
  uint8_t flags =
      (e.has_ret ? kHasRet : 0) | (e.has_ret && e.ret ? kNonZeroRet : 0) | (rare ? kRare : 0);
  put_head({flags, e.ts_ns, e.dur_ns, e.pid, e.tid, name_index(e.vendor, e.api, e.op, e.kind),
            comm_index(e.comm_view()), stack_index(e.stack_id)});
  Thread& t = enc_->state;
  if (e.present == t.present) b.bytes[0] |= kSameMask;
  if (rare) b.push_back(rare);
  if (flags & kNonZeroRet) put_varint(b, zigzag(e.ret));
  if (rare & kPeerComm) put_varint(b, comm_index(e.peer_comm_view()));
  if (rare & kOffCpu) {
    put_varint(b, e.off_cpu_ns);
    put_varint(b, e.preempts);
    put_varint(b, e.switches);
  }
  if (rare & kCgroup) put_varint(b, e.cgroup_id);
  if (e.present != t.present) put_varint(b, e.present);
  t.present = e.present;
  for (uint64_t m = e.present; m; m &= m - 1) {
    auto f = size_t(std::countr_zero(m));
    put_varint(b, zigzag(int64_t(e.fields[f] - t.fields[f])));
    t.fields[f] = e.fields[f];
  }
  if (!append()) return false;
  ++calls_;
  ++*enc_->calls;
  return true;
}

bool CallCache::add_run(const engine::CallRun& r) {
  if (!room_for(r.pid, r.tid)) return false;
  std::string_view comm = r.comm_view();
  put_head({uint8_t(kRunFlag | (r.cgroup_id ? kRare : 0)), uint64_t(r.ts_ns), r.span_ns, r.pid,
            r.tid, name_index(r.vendor, r.api, r.op, r.kind), comm_index(comm),
            stack_index(r.stack_id)});
  Item& b = one_;
  if (r.cgroup_id) b.push_back(kCgroup);
  put_varint(b, r.calls);
  put_varint(b, r.sum_ns);
  put_varint(b, r.min_ns);
  put_varint(b, r.max_ns);
  put_varint(b, r.untimed);
  if (r.untimed) {
    put_varint(b, r.untimed_ns);
    put_varint(b, r.timed_min_ns);
    put_varint(b, r.timed_max_ns);
  }
  put_varint(b, r.nested);
  put_varint(b, r.stream ? *r.stream + 1 : 0);
  put_varint(b, r.device ? *r.device + 1 : 0);
  put_varint(b, r.func ? *r.func + 1 : 0);
  put_varint(b, r.funcs.empty() ? 0 : funcs_index(r.funcs) + 1);
  if (r.cgroup_id) put_varint(b, r.cgroup_id);
  if (!append()) return false;
  calls_ += r.calls;
  *enc_->calls += r.calls;
  return true;
}

// The head: flags; the start's delta; the length; the thread's index unless it is the
// previous item's, and for a thread not seen before its pid and tid; the name; the comm where
// it is not the thread's previous item's; the stack.
void CallCache::put_head(Head h) {
  uint64_t who = uint64_t(h.pid) << 32 | h.tid;
  bool fresh = false;
  if (enc_ && who == enc_who_) {
    h.flags |= kSameThread;
  } else {
    auto [it, added] = enc_threads_.try_emplace(who);
    if (added) {
      it->second.index = uint32_t(enc_threads_.size() - 1);
      it->second.calls = &per_pid_[h.pid];
      it->second.state.comm = UINT32_MAX;
    }
    fresh = added;
    enc_ = &it->second;
    enc_who_ = who;
  }
  Thread& t = enc_->state;
  if (h.comm != t.comm) h.flags |= kNewComm;
  one_.clear();
  one_.push_back(h.flags);
  put_varint(one_, zigzag(int64_t(h.ts - enc_ts_)));
  enc_ts_ = h.ts;
  put_varint(one_, h.length);
  if (!(h.flags & kSameThread)) {
    put_varint(one_, enc_->index);
    if (fresh) {
      put_varint(one_, h.pid);
      put_varint(one_, h.tid);
    }
  }
  put_varint(one_, h.name);
  if (h.flags & kNewComm) put_varint(one_, h.comm);
  t.comm = h.comm;
  put_varint(one_, h.stack);
}

const uint8_t* CallCache::get_head(const uint8_t* p, Decoder& at, Head& h) const {
  uint64_t v = 0;
  h.flags = *p++;
  p = get(p, v);
  at.ts += uint64_t(unzigzag(v));
  h.ts = at.ts;
  p = get(p, h.length);
  if (!(h.flags & kSameThread)) {
    p = get(p, v);
    at.thread = uint32_t(v);
    if (at.thread == at.who.size()) {  // first seen
      uint64_t pid = 0, tid = 0;
      p = get(p, pid);
      p = get(p, tid);
      at.who.emplace_back(uint32_t(pid), uint32_t(tid));
      at.threads.emplace_back();
    }
  }
  h.pid = at.who[at.thread].first;
  h.tid = at.who[at.thread].second;
  p = get(p, v);
  h.name = uint32_t(v);
  Thread& t = at.threads[at.thread];
  if (h.flags & kNewComm) {
    p = get(p, v);
    t.comm = uint32_t(v);
  }
  h.comm = t.comm;
  p = get(p, v);
  h.stack = uint32_t(v);
  return p;
}

bool CallCache::append() {
  if (chunks_.empty() || chunks_.back().size + one_.size() > kChunkBytes) {
    if (bytes() + kChunkBytes > max_bytes_) return false;
    if (stop_ && stop_->load(std::memory_order_relaxed)) return false;
    if (expected_ > calls_ && calls_ > 0 &&
        double(bytes()) / double(calls_) * double(expected_) > 1.25 * double(max_bytes_))
      return false;
    auto* p = static_cast<uint8_t*>(hal::alloc_huge_pages(kChunkBytes));
    if (!p) throw std::bad_alloc();
    chunks_.push_back({std::unique_ptr<uint8_t[], Free>(p), 0});
  }
  Chunk& c = chunks_.back();
  std::memcpy(c.data.get() + c.size, one_.data(), one_.size());
  c.size += one_.size();
  return true;
}

const uint8_t* CallCache::decode(const uint8_t* p, Decoder& at, hal::Event& e) const {
  Head h;
  p = get_head(p, at, h);
  uint8_t flags = h.flags, rare = flags & kRare ? *p++ : 0;
  uint64_t v = 0;
  e.reset();
  e.ts_ns = h.ts;
  e.dur_ns = h.length;
  e.pid = h.pid;
  e.tid = h.tid;
  const Names& n = names_[h.name];
  e.vendor = n.vendor;
  e.api = n.api;
  e.op = n.op;
  e.kind = n.kind;
  e.set_comm(comms_[h.comm]);
  e.stack_id = stacks_[h.stack];
  e.has_ret = flags & kHasRet;
  if (flags & kNonZeroRet) {
    p = get(p, v);
    e.ret = unzigzag(v);
  }
  e.unfinished = rare & kUnfinished;
  if (rare & kPeerComm) {
    p = get(p, v);
    e.set_peer_comm(comms_[v]);
  }
  if (rare & kOffCpu) {
    p = get(p, e.off_cpu_ns);
    p = get(p, v);
    e.preempts = uint32_t(v);
    p = get(p, v);
    e.switches = uint32_t(v);
  }
  if (rare & kCgroup) p = get(p, e.cgroup_id);
  Thread& t = at.threads[at.thread];
  if (!(flags & kSameMask)) p = get(p, t.present);
  for (uint64_t m = t.present; m; m &= m - 1) {
    p = get(p, v);
    auto f = size_t(std::countr_zero(m));
    t.fields[f] += uint64_t(unzigzag(v));
    e.set(static_cast<hal::Field>(f), t.fields[f]);
  }
  return p;
}

const uint8_t* CallCache::decode_run(const uint8_t* p, Decoder& at, engine::CallRun& r) const {
  Head h;
  p = get_head(p, at, h);
  uint8_t rare = h.flags & kRare ? *p++ : 0;
  uint64_t v = 0;
  r.ts_ns = int64_t(h.ts);
  r.span_ns = h.length;
  r.pid = h.pid;
  r.tid = h.tid;
  const Names& n = names_[h.name];
  r.vendor = n.vendor;
  r.api = n.api;
  r.op = n.op;
  r.kind = n.kind;
  r.library = {};
  r.comm = {};
  const std::string& comm = comms_[h.comm];
  std::copy_n(comm.data(), std::min(comm.size(), r.comm.size() - 1), r.comm.data());
  r.stack_id = stacks_[h.stack];
  p = get(p, r.calls);
  p = get(p, r.sum_ns);
  p = get(p, r.min_ns);
  p = get(p, r.max_ns);
  p = get(p, r.untimed);
  r.untimed_ns = r.timed_min_ns = r.timed_max_ns = 0;
  if (r.untimed) {
    p = get(p, r.untimed_ns);
    p = get(p, r.timed_min_ns);
    p = get(p, r.timed_max_ns);
  }
  p = get(p, r.nested);
  p = get(p, v);
  r.stream = v ? std::optional<uint64_t>(v - 1) : std::nullopt;
  p = get(p, v);
  r.device = v ? std::optional<uint64_t>(v - 1) : std::nullopt;
  p = get(p, v);
  r.func = v ? std::optional<uint64_t>(v - 1) : std::nullopt;
  p = get(p, v);
  r.funcs = v && v <= funcs_.size() ? funcs_[v - 1] : std::string_view();
  r.cgroup_id = 0;
  if (rare & kCgroup) p = get(p, r.cgroup_id);
  return p;
}

void CallCache::intern_names(StringPool& strings) {
  name_ids_.clear();
  for (uint32_t i = 0; i < names_.size(); ++i) {
    Names& n = names_[i];
    n = {strings.intern(n.vendor), strings.intern(n.api), strings.intern(n.op), n.kind};
    name_ids_[n.op.data()].push_back(i);
  }
  func_ids_.clear();
  for (uint32_t i = 0; i < funcs_.size(); ++i) func_ids_[funcs_[i] = strings.intern(funcs_[i])] = i;
}

size_t CallCache::bytes() const {
  return chunks_.size() * kChunkBytes + comms_.size() * 48 + funcs_.size() * 48 +
         stacks_.size() * 40 + names_.size() * 64 + enc_threads_.size() * (sizeof(EncThread) + 32);
}

size_t CallCache::encoded_bytes() const {
  size_t n = 0;
  for (const Chunk& c : chunks_) n += c.size;
  return n;
}

void CallCache::clear() {
  std::vector<Chunk>().swap(chunks_);
  calls_ = 0;
  enc_ts_ = 0;
  enc_who_ = UINT64_MAX;
  enc_ = nullptr;
  enc_threads_.clear();
  per_pid_.clear();
  names_.clear();
  name_ids_.clear();
  comms_.clear();
  comm_ids_.clear();
  funcs_.clear();
  func_ids_.clear();
  last_comm_ = 0;
  stacks_.clear();
  stack_ids_.clear();
}

}  // namespace ingero::store

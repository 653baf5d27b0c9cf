#include "hal/call_record.h"

#include <algorithm>
#include <cstring>

namespace ingero::hal {
namespace {

constexpr size_t rounded(size_t n) { return (n + 7) & ~size_t(7); }

// The words and blocks after a header, in wire order.
void pack_body(const CallRecord& r, std::vector<uint8_t>& out) {
  const ingero_call_rec& h = r.hdr;
  auto put = [&](const void* src, size_t n, size_t advance) {
    size_t at = out.size();
    out.resize(at + advance, 0);
    std::memcpy(out.data() + at, src, n);
  };
  size_t nregs = std::min<size_t>(h.nregs, INGERO_REG_WORDS);
  size_t nstack = std::min<size_t>(h.nstack, INGERO_STACK_WORDS);
  put(r.regs, 8 * nregs, 8 * nregs);
  put(r.stack, 8 * nstack, 8 * nstack);
  if (h.flags & INGERO_CALL_OFFCPU) put(&r.offcpu, sizeof(r.offcpu), sizeof(r.offcpu));
  if (h.flags & INGERO_CALL_IDENT) put(&r.ident, sizeof(r.ident), sizeof(r.ident));
  if (h.flags & INGERO_CALL_CALLER) put(&r.caller, sizeof(r.caller), sizeof(r.caller));
  size_t rl = std::min<size_t>(h.return_len, INGERO_RETURN_READ_MAX);
  size_t el = std::min<size_t>(h.entry_len, INGERO_ENTRY_READ_MAX);
  put(r.return_buf, rl, rounded(rl));
  put(r.entry_buf, el, rounded(el));
}

// An untimed launch's short header, as the call record's.
bool unpack_launch_header(const uint8_t* p, size_t size, ingero_call_rec& h) {
  ingero_launch_rec l;
  if (size < sizeof(l)) return false;
  std::memcpy(&l, p, sizeof(l));
  h = {};
  h.type = INGERO_REC_CALL;
  h.probe_id = l.probe_id;
  h.pid = l.pid;
  h.tid = l.tid;
  h.start_ns = l.start_ns;
  h.stack_hash = l.stack_hash;
  h.flags = l.flags;
  h.nregs = l.nregs;
  h.nstack = l.nstack;
  return true;
}

}  // namespace

std::vector<uint8_t> pack_call(const CallRecord& r) {
  std::vector<uint8_t> out(sizeof(r.hdr));
  std::memcpy(out.data(), &r.hdr, sizeof(r.hdr));
  pack_body(r, out);
  return out;
}

std::vector<uint8_t> pack_launch(const CallRecord& r) {
  const ingero_call_rec& h = r.hdr;
  ingero_launch_rec l{};
  l.type = INGERO_REC_LAUNCH;
  l.probe_id = h.probe_id;
  l.pid = h.pid;
  l.tid = h.tid;
  l.start_ns = h.start_ns;
  l.stack_hash = h.stack_hash;
  l.flags = h.flags;
  l.nregs = h.nregs;
  l.nstack = h.nstack;
  std::vector<uint8_t> out(sizeof(l));
  pack_body(r, out);
  l.size = uint32_t(out.size());
  std::memcpy(out.data(), &l, sizeof(l));
  return out;
}

std::vector<uint8_t> pack_launch_batch(const std::vector<std::vector<uint8_t>>& launches) {
  ingero_launch_batch_rec b{};
  b.type = INGERO_REC_LAUNCH_BATCH;
  b.count = uint32_t(launches.size());
  std::vector<uint8_t> out(sizeof(b));
  for (const auto& l : launches) {
    size_t at = out.size();
    out.resize(at + rounded(l.size()), 0);
    std::memcpy(out.data() + at, l.data(), l.size());
  }
  b.bytes = uint32_t(out.size() - sizeof(b));
  std::memcpy(out.data(), &b, sizeof(b));
  return out;
}

bool unpack_call(const void* data, size_t size, CallRecord& out) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t type = 0;
  if (size < sizeof(type)) return false;
  std::memcpy(&type, p, sizeof(type));
  size_t off = 0;
  if (type == INGERO_REC_LAUNCH) {
    if (!unpack_launch_header(p, size, out.hdr)) return false;
    off = sizeof(ingero_launch_rec);
  } else if (type == INGERO_REC_CALL) {
    if (size < sizeof(ingero_call_rec)) return false;
    std::memcpy(&out.hdr, p, sizeof(out.hdr));
    off = sizeof(ingero_call_rec);
  } else {
    return false;
  }
  const ingero_call_rec& h = out.hdr;
  if (h.nregs > INGERO_REG_WORDS || h.nstack > INGERO_STACK_WORDS ||
      h.entry_len > INGERO_ENTRY_READ_MAX || h.return_len > INGERO_RETURN_READ_MAX)
    return false;
  auto take = [&](void* dst, size_t n, size_t advance) {
    if (off + n > size) return false;
    std::memcpy(dst, p + off, n);
    off += advance;
    return true;
  };
  std::memset(out.regs, 0, sizeof(out.regs));
  std::memset(out.stack, 0, sizeof(out.stack));
  if (!take(out.regs, 8 * h.nregs, 8 * h.nregs) || !take(out.stack, 8 * h.nstack, 8 * h.nstack))
    return false;
  out.offcpu = {};
  out.caller = 0;
  if ((h.flags & INGERO_CALL_OFFCPU) && !take(&out.offcpu, sizeof(out.offcpu), sizeof(out.offcpu)))
    return false;
  if ((h.flags & INGERO_CALL_IDENT) && !take(&out.ident, sizeof(out.ident), sizeof(out.ident)))
    return false;
  if ((h.flags & INGERO_CALL_CALLER) && !take(&out.caller, sizeof(out.caller), sizeof(out.caller)))
    return false;
  if (!take(out.return_buf, h.return_len, rounded(h.return_len))) return false;
  if (!take(out.entry_buf, h.entry_len, rounded(h.entry_len))) return false;
  return true;
}

}  // namespace ingero::hal

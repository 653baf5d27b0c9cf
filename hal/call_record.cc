#include "hal/call_record.h"

#include <algorithm>
#include <cstring>

namespace ingero::hal {
namespace {

constexpr size_t rounded(size_t n) { return (n + 7) & ~size_t(7); }

}  // namespace

std::vector<uint8_t> pack_call(const CallRecord& r) {
  const ingero_call_rec& h = r.hdr;
  std::vector<uint8_t> out(sizeof(h));
  std::memcpy(out.data(), &h, sizeof(h));
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
  return out;
}

bool unpack_call(const void* data, size_t size, CallRecord& out) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (size < sizeof(ingero_call_rec)) return false;
  std::memcpy(&out.hdr, p, sizeof(out.hdr));
  const ingero_call_rec& h = out.hdr;
  if (h.nregs > INGERO_REG_WORDS || h.nstack > INGERO_STACK_WORDS ||
      h.entry_len > INGERO_ENTRY_READ_MAX || h.return_len > INGERO_RETURN_READ_MAX)
    return false;
  size_t off = sizeof(ingero_call_rec);
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

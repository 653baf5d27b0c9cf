// A call record as it arrives (records_call.h: a header, the words its recipe shipped, then the
// optional blocks its flags name) unpacked into fixed fields, so decoding never depends on
// where in the wire record a value sat. An untimed launch's shorter record (ingero_launch_rec)
// unpacks into the same form, the fields it does not carry zero. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ingero_records.h"

namespace ingero::hal {

struct CallRecord {
  ingero_call_rec hdr{};
  uint64_t regs[INGERO_REG_WORDS] = {};     // the first hdr.nregs are captured, the rest 0
  uint64_t stack[INGERO_STACK_WORDS] = {};  // the first hdr.nstack
  ingero_call_offcpu offcpu{};              // zero without INGERO_CALL_OFFCPU
  ingero_call_ident ident{};                // valid with INGERO_CALL_IDENT
  uint64_t caller = 0;                      // the return address, with INGERO_CALL_CALLER
  uint8_t return_buf[INGERO_RETURN_READ_MAX] = {};
  uint8_t entry_buf[INGERO_ENTRY_READ_MAX] = {};
  bool has_ident() const { return hdr.flags & INGERO_CALL_IDENT; }
  // Emitted at entry, not timed (a launch whose return was not sampled).
  bool entry_only() const { return hdr.flags & INGERO_CALL_ENTRY_ONLY; }
};

// The wire form of `r` (the BPF side's layout): for replay sources, benchmarks and tests.
// The header's counts and flags say what goes in.
std::vector<uint8_t> pack_call(const CallRecord& r);
// The same as an untimed launch's record (ingero_launch_rec), as launch_at_entry writes it: the
// header's end, return value, nested counts and read lengths are not carried (they must be 0).
std::vector<uint8_t> pack_launch(const CallRecord& r);

// The same launches gathered in one batch (INGERO_REC_LAUNCH_BATCH), as bpf/launch_batch.h
// submits them: its header, then each launch record (pack_launch) 8-aligned.
std::vector<uint8_t> pack_launch_batch(const std::vector<std::vector<uint8_t>>& launches);

// Hands each launch record of a batch (INGERO_REC_LAUNCH_BATCH) to `each(data, size)`, in order.
// False when the batch is malformed: shorter than its header says, a launch shorter than a
// launch header or running past the batch, or not `count` launches in all. The launches before
// a fault were handed over. Never reads past `size`.
template <typename F>
bool for_each_batched_launch(const void* data, size_t size, F&& each) {
  const auto* p = static_cast<const uint8_t*>(data);
  ingero_launch_batch_rec b;
  if (size < sizeof(b)) return false;
  std::memcpy(&b, p, sizeof(b));
  if (b.type != INGERO_REC_LAUNCH_BATCH || b.bytes > size - sizeof(b)) return false;
  p += sizeof(b);
  uint32_t n = 0;
  for (size_t at = 0; at < b.bytes; ++n) {
    ingero_launch_rec l;
    if (b.bytes - at < sizeof(l)) return false;
    std::memcpy(&l, p + at, sizeof(l));
    if (l.size < sizeof(l) || l.size > b.bytes - at) return false;
    each(static_cast<const void*>(p + at), size_t(l.size));
    at += (size_t(l.size) + 7) & ~size_t(7);
  }
  return n == b.count;
}

// A call record (INGERO_REC_CALL) or an untimed launch's (INGERO_REC_LAUNCH; its hdr.type then
// reads INGERO_REC_CALL). False when the record is of another type, shorter than its header
// says, or its counts are out of range: the caller counts it as malformed. Never reads past
// `size`.
bool unpack_call(const void* data, size_t size, CallRecord& out);

}  // namespace ingero::hal

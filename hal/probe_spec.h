// How a backend describes the functions it traces: one static constexpr ProbeSpec table per
// library flavour, read by hal/ to resolve, attach, capture and decode.
//
// ArgRecipe says what the generic BPF pair copies (it mirrors struct ingero_recipe); the
// FieldRef list says which captured value becomes which Event field. Most decoding is
// therefore data; VendorBackend::decode() only adds what data cannot express (bytes =
// count x sizeof(datatype), enum translation, hashing).
#pragma once

#include <cstdint>
#include <string_view>

#include "hal/event.h"
#include "hal/kernel_names.h"

namespace ingero::hal {

// A value in a captured call.
struct ArgRef {
  enum class Src : uint8_t { kNone, kReg, kStack, kRet, kEntryBuf, kReturnBuf, kConst };
  Src src = Src::kNone;
  uint8_t index = 0;    // register 0..5 (System V: rdi rsi rdx rcx r8 r9) or stack word
  uint8_t width = 8;    // bytes to keep: 1, 2, 4 or 8
  uint8_t shift = 0;    // bits to shift right first (second half of a packed dim3)
  uint16_t offset = 0;  // byte offset in the entry/return buffer
  uint64_t value = 0;   // for kConst
};

constexpr ArgRef reg(uint8_t i, uint8_t width = 8, uint8_t shift = 0) {
  return {ArgRef::Src::kReg, i, width, shift, 0, 0};
}
constexpr ArgRef stack_arg(uint8_t word, uint8_t width = 8, uint8_t shift = 0) {
  return {ArgRef::Src::kStack, word, width, shift, 0, 0};
}
constexpr ArgRef entry_buf(uint16_t offset, uint8_t width = 8) {
  return {ArgRef::Src::kEntryBuf, 0, width, 0, offset, 0};
}
constexpr ArgRef return_buf(uint16_t offset, uint8_t width = 8) {
  return {ArgRef::Src::kReturnBuf, 0, width, 0, offset, 0};
}
constexpr ArgRef constant(uint64_t v) { return {ArgRef::Src::kConst, 0, 8, 0, 0, v}; }
// A copy's direction implied by the function itself (cuMemcpyHtoD, hipMemcpyDtoH).
constexpr ArgRef constant(CopyDirection d) { return constant(uint64_t(d)); }
constexpr ArgRef ret_value(uint8_t width = 8) { return {ArgRef::Src::kRet, 0, width, 0, 0, 0}; }

// A bounded read of user memory, mirrored into struct ingero_ptr_read.
struct PtrRead {
  enum class Src : uint8_t { kNone = 0, kReg = 1, kStackWord = 2, kStackAddr = 3 };
  Src src = Src::kNone;
  uint8_t index = 0;
  uint16_t len = 0;
  uint32_t offset = 0;
};
// Read `len` bytes at the pointer held in register argument `i`.
constexpr PtrRead read_at_reg(uint8_t i, uint16_t len, uint32_t offset = 0) {
  return {PtrRead::Src::kReg, i, len, offset};
}
// Read the stack argument area itself: a by-value struct the ABI passes in memory.
constexpr PtrRead read_stack_area(uint16_t len, uint32_t offset = 0) {
  return {PtrRead::Src::kStackAddr, 0, len, offset};
}

struct ArgRecipe {
  uint8_t stack_words = 0;  // stack argument words to copy at entry
  PtrRead entry_read{};     // into the entry buffer (<= 128 bytes)
  PtrRead return_read{};    // at return, through an entry-time argument (<= 32 bytes)
};

struct FieldRef {
  Field field = Field::kCount_;  // kCount_ marks an unused slot
  ArgRef from{};
};
inline constexpr size_t kMaxFieldRefs = 10;

// Exported variants of one API: per-thread default stream (CUDA's _ptsz/_ptds, HIP's _spt) and
// ABI revisions.
enum Variant : uint16_t {
  kBase = 1 << 0,
  kPtsz = 1 << 1,
  kPtds = 1 << 2,
  kV2 = 1 << 3,
  kV2Ptsz = 1 << 4,
  kV2Ptds = 1 << 5,
  kSpt = 1 << 6,
};
inline constexpr uint16_t kDefaultVariants = kBase | kPtsz | kPtds;
inline constexpr uint16_t kV2Variants = kV2 | kV2Ptsz | kV2Ptds;

// Where a kernel name source (a spec of kind EventKind::kKernelName; hal/kernel_names.h) finds
// what it names: `func` is the key launches carry; it is named by the NUL-terminated string at
// `name` in the process, or takes the name of the key `alias_of` (a handle looked up from a
// host stub). With `needs_success`, a call returning non-zero names nothing (its output
// pointer was not written).
//
// A look-up (an output at return_buf(0) or the return value, asked about a register argument)
// is shipped once per answer: libraries such as cuDNN look their kernels up again before every
// launch, and a repeat names nothing new. With `answer_fixed`, the register argument alone fixes
// the answer within a process image (a stub's cudaKernel_t, a handle's name), so a repeat is
// not even entered: no return probe. A look-up whose answer depends on the thread's current
// device (cuKernelGetFunction, hipGetFuncBySymbol) must not say so.
struct NameRecipe {
  KernelNameSource source = KernelNameSource::kNone;
  ArgRef func{};
  ArgRef name{};
  ArgRef alias_of{};
  bool needs_success = false;
  bool answer_fixed = false;
};

struct ProbeSpec {
  std::string_view symbol;  // documented API name, without variant suffixes
  EventKind kind = EventKind::kUnknown;
  ArgRecipe args{};
  FieldRef fields[kMaxFieldRefs]{};
  bool optional = false;  // absent in some library versions: not an error
  uint16_t variants = kDefaultVariants;
  NameRecipe name{};  // kind kKernelName only
};

}  // namespace ingero::hal

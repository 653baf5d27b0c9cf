// The backend vocabulary's few functions: a raw call's arguments, the registry.
#include "hal/backend.h"

#include <algorithm>
#include <cstring>

namespace ingero::hal {

namespace {

uint64_t read_le(const uint8_t* p, uint8_t width) {
  uint64_t v = 0;
  std::memcpy(&v, p, width > 8 ? 8 : width);
  return v;
}

}  // namespace

std::optional<uint64_t> RawCall::buffer_value(const ArgRef& ref) const {
  switch (ref.src) {
    case ArgRef::Src::kRet:
      if (rec_.hdr.flags & INGERO_CALL_UNFINISHED) return std::nullopt;
      return extract(rec_.hdr.ret, ref);
    case ArgRef::Src::kEntryBuf:
      if (size_t(ref.offset) + ref.width > rec_.hdr.entry_len) return std::nullopt;
      return read_le(rec_.entry_buf + ref.offset, ref.width);
    case ArgRef::Src::kReturnBuf:
      if (size_t(ref.offset) + ref.width > rec_.hdr.return_len) return std::nullopt;
      return read_le(rec_.return_buf + ref.offset, ref.width);
    default:  // kNone; kReg, kStack and kConst are value()'s
      return std::nullopt;
  }
}

std::span<const uint8_t> RawCall::entry_bytes() const {
  return {rec_.entry_buf, std::min<size_t>(rec_.hdr.entry_len, INGERO_ENTRY_READ_MAX)};
}
std::span<const uint8_t> RawCall::return_bytes() const {
  return {rec_.return_buf, std::min<size_t>(rec_.hdr.return_len, INGERO_RETURN_READ_MAX)};
}
uint64_t RawCall::reg(int i) const { return i >= 0 && i < rec_.hdr.nregs ? rec_.regs[i] : 0; }
uint64_t RawCall::ret() const { return rec_.hdr.ret; }

bool basename_matches(std::string_view basename, std::string_view prefix) {
  if (basename.substr(0, prefix.size()) != prefix) return false;
  std::string_view rest = basename.substr(prefix.size());
  return rest.empty() || rest[0] == '.' || rest[0] == '-' || rest[0] == '_';
}

bool defines_all(const SymbolIndex& symbols, std::initializer_list<std::string_view> names) {
  for (auto n : names)
    if (!symbols.find_function(n)) return false;
  return true;
}

void BackendRegistry::add(std::unique_ptr<VendorBackend> backend) {
  backends_.push_back(std::move(backend));
}

const VendorBackend* BackendRegistry::find(std::string_view name) const {
  for (const auto& b : backends_)
    if (b->name() == name) return b.get();
  return nullptr;
}

std::vector<const VendorBackend*> BackendRegistry::all() const {
  std::vector<const VendorBackend*> out;
  for (const auto& b : backends_) out.push_back(b.get());
  return out;
}

Result<std::vector<const VendorBackend*>> BackendRegistry::select(std::string_view names) const {
  if (names.empty()) return all();
  std::string known;
  for (const auto& x : backends_) known += (known.empty() ? "" : ", ") + std::string(x->name());
  const std::string given(names);
  std::vector<const VendorBackend*> out;
  while (true) {
    size_t comma = names.find(',');
    std::string_view n = names.substr(0, comma);
    // ",", "cuda,,nccl": an empty name chose nothing and was passed over (`check --backends ,`
    // audited no backend and passed).
    if (n.empty())
      return make_error("an empty backend name in '" + given + "' (known: " + known + ")");
    const VendorBackend* b = find(n);
    if (!b) return make_error("unknown backend '" + std::string(n) + "' (known: " + known + ")");
    // A name given twice is one backend: "cuda,cuda" attached every CUDA probe twice, two traps
    // a call.
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
    if (comma == std::string_view::npos) break;
    names = names.substr(comma + 1);
  }
  return out;
}

std::vector<SqlView> BackendRegistry::views() const {
  std::vector<SqlView> out;
  for (const auto& b : backends_)
    for (const auto& v : b->views()) out.push_back(v);
  return out;
}

std::string_view BackendRegistry::device_event_name(std::string_view api, uint64_t type) const {
  for (const auto& b : backends_)
    if (auto n = b->device_event_name(api, type); !n.empty()) return n;
  return {};
}

std::optional<ErrorCode> BackendRegistry::error_code(std::string_view api, int64_t ret) const {
  for (const auto& b : backends_)
    if (auto c = b->error_code(api, ret)) return c;
  return std::nullopt;
}

}  // namespace ingero::hal

#include "fleet/row_binary.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ingero::fleet {

ingero::Result<ChType> parse_ch_type(std::string_view type) {
  ChType t;
  std::string_view base = type;
  constexpr std::string_view kNullable = "Nullable(";
  if (base.substr(0, kNullable.size()) == kNullable && base.back() == ')') {
    t.nullable = true;
    base = base.substr(kNullable.size(), base.size() - kNullable.size() - 1);
  }
  static constexpr std::pair<std::string_view, ChBase> kBases[] = {
      {"String", ChBase::kString}, {"UInt8", ChBase::kUInt8}, {"UInt32", ChBase::kUInt32},
      {"UInt64", ChBase::kUInt64}, {"Int64", ChBase::kInt64}, {"Float64", ChBase::kFloat64}};
  for (const auto& [name, b] : kBases)
    if (base == name) {
      t.base = b;
      return t;
    }
  return ingero::make_error("RowBinary: no encoding for the ClickHouse type " + std::string(type));
}

ingero::Result<std::vector<ChType>> column_types(const TableSpec& t) {
  std::vector<ChType> out;
  for (const auto& c : t.columns) {
    auto ct = parse_ch_type(c.type);
    if (!ct) return ingero::make_error(t.name + "." + c.name + ": " + ct.error().message);
    out.push_back(*ct);
  }
  return out;
}

void RowBinary::text_of(int64_t v, char* buf) { std::snprintf(buf, 24, "%lld", (long long)v); }

void RowBinary::real_text(double v, char* buf) {
  std::snprintf(buf, 40, "%.15g", v);
  bool plain = true;
  for (const char* c = buf; *c; ++c)
    if (*c == '.' || *c == 'e' || *c == 'n' || *c == 'i') plain = false;
  if (plain) std::strcat(buf, ".0");
}

void RowBinary::text(ChType t, std::string_view s) {
  if (t.base == ChBase::kString) {
    if (t.nullable) out_.push_back('\0');
    string_value(s);
    return;
  }
  std::string z(s.substr(0, 64));
  if (t.base == ChBase::kFloat64)
    real(t, std::strtod(z.c_str(), nullptr));
  else
    integer(t, std::strtoll(z.c_str(), nullptr, 10));
}

}  // namespace ingero::fleet

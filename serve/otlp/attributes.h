// Building OTLP attributes (KeyValue lists) from C++ values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "opentelemetry/proto/common/v1/common.pb.h"

namespace ingero::serve::otlp {

using KeyValues = google::protobuf::RepeatedPtrField<opentelemetry::proto::common::v1::KeyValue>;

inline void add_attr(KeyValues* kv, std::string_view key, std::string_view value) {
  auto* a = kv->Add();
  a->set_key(std::string(key));
  a->mutable_value()->set_string_value(std::string(value));
}
inline void add_attr(KeyValues* kv, std::string_view key, const char* value) {
  add_attr(kv, key, std::string_view(value));
}
inline void add_attr(KeyValues* kv, std::string_view key, int64_t value) {
  auto* a = kv->Add();
  a->set_key(std::string(key));
  a->mutable_value()->set_int_value(value);
}
inline void add_attr(KeyValues* kv, std::string_view key, double value) {
  auto* a = kv->Add();
  a->set_key(std::string(key));
  a->mutable_value()->set_double_value(value);
}
inline void add_attr(KeyValues* kv, std::string_view key, const std::vector<std::string>& values) {
  auto* a = kv->Add();
  a->set_key(std::string(key));
  auto* arr = a->mutable_value()->mutable_array_value();
  for (const auto& v : values) arr->add_values()->set_string_value(v);
}
inline void add_attr(KeyValues* kv, std::string_view key, const std::vector<int64_t>& values) {
  auto* a = kv->Add();
  a->set_key(std::string(key));
  auto* arr = a->mutable_value()->mutable_array_value();
  for (int64_t v : values) arr->add_values()->set_int_value(v);
}

}  // namespace ingero::serve::otlp

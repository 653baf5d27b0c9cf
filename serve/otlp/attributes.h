// Building OTLP attributes (KeyValue lists) from C++ values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hal/utf8.h"
#include "opentelemetry/proto/common/v1/common.pb.h"

namespace ingero::serve::otlp {

using KeyValues = google::protobuf::RepeatedPtrField<opentelemetry::proto::common::v1::KeyValue>;

// String values are made UTF-8 (hal/utf8.h): a traced name may hold any bytes, and a proto3
// string that is not UTF-8 makes the whole request one a strict collector rejects.
inline void add_attr(KeyValues* kv, std::string_view key, std::string_view value) {
  auto* a = kv->Add();
  a->set_key(std::string(key));
  a->mutable_value()->set_string_value(hal::valid_utf8(value));
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
  for (const auto& v : values) arr->add_values()->set_string_value(hal::valid_utf8(v));
}
inline void add_attr(KeyValues* kv, std::string_view key, const std::vector<int64_t>& values) {
  auto* a = kv->Add();
  a->set_key(std::string(key));
  auto* arr = a->mutable_value()->mutable_array_value();
  for (int64_t v : values) arr->add_values()->set_int_value(v);
}

}  // namespace ingero::serve::otlp

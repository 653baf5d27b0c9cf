#include <map>

#include "serve/mcp/tool_support.h"

namespace ingero::serve::mcp {
namespace {

std::atomic<uint64_t> g_generation{1};

}  // namespace

ToolContext::ToolContext(std::string db_path, ToolHost host)
    : db_path_(std::move(db_path)), host_(std::move(host)), generation_(g_generation++) {}

ingero::Status ToolContext::validate() {
  auto r = store::TraceReader::open(db_path_);
  if (!r) return r.error();
  return {};
}

ingero::Result<store::TraceReader*> ToolContext::reader(int which) {
  struct Slot {
    uint64_t generation = 0;
    std::unique_ptr<store::TraceReader> r[2];
  };
  thread_local std::map<const ToolContext*, Slot> slots;
  Slot& s = slots[this];
  if (s.generation != generation_) {
    s = Slot{};
    s.generation = generation_;
  }
  if (!s.r[which]) {
    auto r = store::TraceReader::open(db_path_);
    if (!r) return r.error();
    s.r[which] = std::move(*r);
  }
  return s.r[which].get();
}

ingero::Result<store::TraceReader*> ToolContext::engine_reader() { return reader(0); }
ingero::Result<store::TraceReader*> ToolContext::sql_reader() { return reader(1); }

Json ToolContext::host_check() {
  if (!host_.audit) return nullptr;
  std::lock_guard<std::mutex> g(check_mu_);
  auto now = std::chrono::steady_clock::now();
  if (!check_.is_null() && now - check_at_ < std::chrono::seconds(10)) return check_;
  check_ = host_.audit();
  check_at_ = now;
  return check_;
}

}  // namespace ingero::serve::mcp

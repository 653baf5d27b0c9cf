#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "serve/mcp/tool_support.h"
#include "store/trace_cache.h"

namespace ingero::serve::mcp {
namespace {

std::atomic<uint64_t> g_generation{1};

}  // namespace

ToolContext::ToolContext(std::string db_path, ToolHost host)
    : db_path_(std::move(db_path)), host_(std::move(host)), generation_(g_generation++) {}

ingero::Status ToolContext::validate() {
  if (over_fleet()) {
    auto f = open_fleet();
    if (!f) return f.error();
    (*f)->nodes();
    if (std::string e = (*f)->error(); !e.empty()) return ingero::make_error(e);
    return {};
  }
  auto r = store::TraceReader::open(db_path_, host_.views, host_.error_codes);
  if (!r) return r.error();
  return {};
}

ingero::Result<store::TraceReader*> ToolContext::reader(int which) {
  if (over_fleet())
    return ingero::make_error(
        "this tool reads a trace file itself (its sessions, its stacks table) and is not served "
        "over a fleet database; serve a node's trace file (ingero mcp --db), or use the tools "
        "that analyse calls (get_trace_stats, get_causal_chains, get_inflight, ...) and run_sql "
        "(ClickHouse's SQL), which answer over every node");
  struct Slot {
    uint64_t generation = 0;
    std::unique_ptr<store::TraceReader> r[2];
    dev_t dev[2] = {};
    ino_t ino[2] = {};
  };
  thread_local std::map<const ToolContext*, Slot> slots;
  Slot& s = slots[this];
  if (s.generation != generation_) {
    s = Slot{};
    s.generation = generation_;
  }
  // The file the path names now: one replaced (a new trace renamed over it) or removed since
  // the reader opened was still answered from, by each worker thread's reader as it opened
  // it, so that the same question got the old file's and the new one's answers in turn.
  struct stat now {};
  if (::stat(db_path_.c_str(), &now) != 0) {
    s.r[which].reset();
    return ingero::Error::sys(db_path_ + ": the trace file is gone", errno);
  }
  if (s.r[which] && (now.st_dev != s.dev[which] || now.st_ino != s.ino[which])) s.r[which].reset();
  // A compact that archived the file's rows since: the reader's `events` would miss them.
  if (s.r[which] && !s.r[which]->archive_current()) s.r[which].reset();
  if (!s.r[which]) {
    auto r = store::TraceReader::open(db_path_, host_.views, host_.error_codes);
    if (!r) return r.error();
    s.r[which] = std::move(*r);
    s.dev[which] = now.st_dev;
    s.ino[which] = now.st_ino;
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

struct ToolContext::CacheSlot {
  std::string key;
  std::unique_ptr<store::TraceCache> cache;
};

ToolOutput ToolContext::cached(const std::string& key, std::function<ToolOutput()> run) {
  // A fleet database has no file whose change says when an answer is stale.
  if (over_fleet()) {
    ++cache_computations_;
    return run();
  }
  std::shared_ptr<CacheSlot> slot;
  {
    std::lock_guard<std::mutex> g(cache_mu_);
    auto it = std::find_if(cache_lru_.begin(), cache_lru_.end(),
                           [&](const auto& s) { return s->key == key; });
    if (it != cache_lru_.end()) {
      cache_lru_.splice(cache_lru_.begin(), cache_lru_, it);
      slot = cache_lru_.front();
    } else {
      slot = std::make_shared<CacheSlot>();
      slot->key = key;
      slot->cache = std::make_unique<store::TraceCache>(
          db_path_,
          [this, run = std::move(run)]() -> Result<std::string> {
            ++cache_computations_;
            auto t0 = std::chrono::steady_clock::now();
            ToolOutput o = run();
            last_computation_s_ =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return Json{{"text", o.text}, {"structured", o.structured}, {"is_error", o.is_error}}
                .dump(-1, ' ', false, Json::error_handler_t::replace);
          },
          std::chrono::milliseconds(0));
      cache_lru_.push_front(slot);
      if (cache_lru_.size() > kMaxCachedCalls) cache_lru_.pop_back();
    }
  }
  // Outside the lock: a computation blocks only the calls that wait for the same key.
  store::TraceCache::Entry e = slot->cache->get();
  ToolOutput o;
  Json j = Json::parse(*e.body, nullptr, false);
  if (!e.ok || j.is_discarded() || !j.contains("text")) {
    o.is_error = true;
    o.text = j.is_object() && j.contains("error") ? j["error"].get<std::string>() : *e.body;
    return o;
  }
  o.text = j["text"].get<std::string>();
  o.structured = std::move(j["structured"]);
  o.is_error = j["is_error"].get<bool>();
  return o;
}

uint64_t ToolContext::cache_computations() const { return cache_computations_; }
double ToolContext::last_computation_seconds() const { return last_computation_s_; }

}  // namespace ingero::serve::mcp

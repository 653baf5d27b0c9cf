#include "fleet/clickhouse_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "compress/gzip.h"
#include "engine/json_text.h"

namespace ingero::fleet {
namespace {

constexpr size_t kMaxErrorBody = 8192;

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Call {
  CURL* h = nullptr;
  const ChunkFn* on_chunk = nullptr;
  long status = 0;
  std::string error_body;
  bool stopped = false;
  const std::atomic<int64_t>* deadline_ns = nullptr;
  bool past_deadline = false;
  std::string summary;  // the answer's X-ClickHouse-Summary, where it has one
};

// Each header line of the answer: X-ClickHouse-Summary is kept (a new status line, after a
// redirect or an interim answer, starts over).
size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<Call*>(user);
  size_t len = size * n;
  std::string_view line(data, len);
  constexpr std::string_view kName = "x-clickhouse-summary:";
  if (line.substr(0, 5) == "HTTP/") c->summary.clear();
  if (line.size() > kName.size() &&
      std::equal(kName.begin(), kName.end(), line.begin(),
                 [](char a, char b) { return a == std::tolower((unsigned char)b); })) {
    line.remove_prefix(kName.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' '))
      line.remove_suffix(1);
    c->summary = std::string(line.substr(0, 4096));
  }
  return len;
}

// libcurl calls it as the transfer progresses, and at least once a second while it waits: a
// deadline set meanwhile (from another thread) ends the request.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* c = static_cast<Call*>(user);
  int64_t d = c->deadline_ns->load();
  if (d && steady_ns() >= d) {
    c->past_deadline = true;
    return 1;  // CURLE_ABORTED_BY_CALLBACK
  }
  return 0;
}

size_t on_write(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<Call*>(user);
  size_t len = size * n;
  if (!c->status) curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &c->status);
  if (c->status != 200) {
    if (c->error_body.size() < kMaxErrorBody)
      c->error_body.append(data, std::min(len, kMaxErrorBody - c->error_body.size()));
    return len;
  }
  if (c->on_chunk && !(*c->on_chunk)(std::string_view(data, len))) {
    c->stopped = true;
    return 0;  // aborts the transfer: CURLE_WRITE_ERROR, which perform() knows we asked for
  }
  return len;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  // ClickHouse appends ", e.what() = DB::Exception" to every message: noise for people.
  if (size_t p = s.rfind(", e.what() = "); p != std::string::npos) s.resize(p);
  return s;
}

// Refusals the same request meets again however often it is retried (clickhouse_client.h,
// refused_for_good): by HTTP status, or by the "Code: N" ClickHouse puts first in its answer.
bool refused_again(long status, std::string_view body) {
  if (status == 401 || status == 403) return true;
  size_t at = body.find("Code: ");
  if (at == std::string_view::npos) return false;
  int code = 0;
  for (size_t i = at + 6; i < body.size() && i < at + 12 && body[i] >= '0' && body[i] <= '9'; ++i)
    code = code * 10 + (body[i] - '0');
  for (int permanent : {16, 47, 164, 192, 193, 194, 497, 516})
    if (code == permanent) return true;
  return false;
}

}  // namespace

const char* failure_name(Failure f) {
  switch (f) {
    case Failure::kNone:
      return "none";
    case Failure::kUnreachable:
      return "unreachable";
    case Failure::kRejected:
      return "rejected";
    case Failure::kAmbiguous:
      return "ambiguous";
  }
  return "?";
}

std::optional<uint64_t> summary_written_rows(std::string_view summary) {
  constexpr std::string_view kKey = "\"written_rows\":";
  size_t p = summary.find(kKey);
  if (p == std::string_view::npos) return std::nullopt;
  p += kKey.size();
  while (p < summary.size() && summary[p] == ' ') ++p;
  bool quoted = p < summary.size() && summary[p] == '"';
  if (quoted) ++p;
  size_t begin = p;
  uint64_t v = 0;
  for (; p < summary.size() && std::isdigit((unsigned char)summary[p]); ++p) {
    if (p - begin >= 19) return std::nullopt;  // past what a count can be
    v = v * 10 + uint64_t(summary[p] - '0');
  }
  if (p == begin || (quoted && (p >= summary.size() || summary[p] != '"'))) return std::nullopt;
  return v;
}

std::string sql_quote(std::string_view text) {
  std::string q = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') q += '\\';
    q += c;
  }
  return q + "'";
}

ClickHouseClient::ClickHouseClient(Endpoint endpoint, ClientOptions options)
    : endpoint_(std::move(endpoint)), options_(options) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
}

ClickHouseClient::~ClickHouseClient() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

std::string ClickHouseClient::url(const Settings& params) const {
  std::string u = endpoint_.base + "/";
  char sep = '?';
  for (const auto& [k, v] : params) {
    char* esc = curl_easy_escape(static_cast<CURL*>(curl_), v.data(), int(v.size()));
    u += sep + k + "=" + (esc ? esc : "");
    curl_free(esc);
    sep = '&';
  }
  return u;
}

void ClickHouseClient::set_deadline(std::chrono::steady_clock::time_point deadline) {
  int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  deadline_ns_ = ns ? ns : 1;
}

ClickHouseClient::Bound ClickHouseClient::bound_deadline(
    std::chrono::steady_clock::time_point deadline) {
  int64_t ns = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count());
  int64_t was = deadline_ns_.load();
  while ((was == 0 || ns < was) && !deadline_ns_.compare_exchange_weak(was, ns)) {
  }
  return {was, deadline_ns_.load()};
}

ingero::Status ClickHouseClient::perform(const Settings& params, std::string_view body,
                                         bool gzip_body, const ChunkFn* on_chunk, int timeout_ms) {
  last_failure_ = Failure::kNone;
  refused_for_good_ = false;
  written_rows_.reset();
  auto* h = static_cast<CURL*>(curl_);
  const std::string where = "ClickHouse at " + endpoint_.display();
  if (!h) {
    last_failure_ = Failure::kUnreachable;
    return ingero::make_error(where + ": cannot initialise libcurl");
  }
  std::string compressed;
  if (gzip_body) {
    auto z = compress::gzip(body, options_.gzip_level);
    if (!z) {
      last_failure_ = Failure::kUnreachable;
      return ingero::make_error(where + ": " + z.error().message);
    }
    compressed = std::move(*z);
    bytes_raw_ += body.size();
    body = compressed;
  }
  // The deadline bounds the connect and the whole request; past it, nothing is sent.
  long connect_ms = options_.connect_timeout_ms;
  if (int64_t d = deadline_ns_.load()) {
    int64_t left_ms = (d - steady_ns()) / 1000000;
    if (left_ms <= 0) {
      last_failure_ = Failure::kUnreachable;
      return ingero::make_error(where + ": not sent, the time allowed ran out");
    }
    connect_ms = long(std::min<int64_t>(connect_ms, left_ms));
    timeout_ms = int(timeout_ms > 0 ? std::min<int64_t>(timeout_ms, left_ms) : left_ms);
  }
  curl_easy_reset(h);
  std::string u = url(params);
  Call call;
  call.h = h;
  call.on_chunk = on_chunk;
  call.deadline_ns = &deadline_ns_;
  curl_slist* headers = curl_slist_append(nullptr, "Expect:");
  if (gzip_body) headers = curl_slist_append(headers, "Content-Encoding: gzip");
  headers = curl_slist_append(headers, "Content-Type: text/plain; charset=UTF-8");
  curl_easy_setopt(h, CURLOPT_URL, u.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &call);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &call);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &call);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, long(timeout_ms));
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // gzip/deflate answers are decoded
  if (!endpoint_.user.empty() || !endpoint_.password.empty()) {
    curl_easy_setopt(h, CURLOPT_HTTPAUTH, long(CURLAUTH_BASIC));
    curl_easy_setopt(h, CURLOPT_USERNAME,
                     endpoint_.user.empty() ? "default" : endpoint_.user.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, endpoint_.password.c_str());
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  curl_off_t uploaded = 0;
  long request_size = 0;
  curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &uploaded);
  curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_size);
  bytes_sent_ += uint64_t(uploaded);
  if (!call.status) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &call.status);
  if (rc == CURLE_WRITE_ERROR && call.stopped) return {};
  if (rc == CURLE_OK && call.status == 200) {
    written_rows_ = summary_written_rows(call.summary);
    return {};
  }
  if (rc == CURLE_OK) {
    last_failure_ = Failure::kRejected;
    refused_for_good_ = refused_again(call.status, call.error_body);
    return ingero::make_error(where + " answered HTTP " + std::to_string(call.status) + ": " +
                              trim(call.error_body));
  }
  std::string what = errbuf[0] ? errbuf : curl_easy_strerror(rc);
  // Nothing left this host: the statement cannot have run.
  last_failure_ = request_size == 0 && uploaded == 0 ? Failure::kUnreachable : Failure::kAmbiguous;
  if (rc == CURLE_ABORTED_BY_CALLBACK && call.past_deadline)
    return ingero::make_error(where + ": no complete answer before the time allowed ran out");
  if (rc == CURLE_OPERATION_TIMEDOUT)
    return ingero::make_error(where + ": no complete answer within " + std::to_string(timeout_ms) +
                              " ms (" + what + ")");
  bool connect = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
                 rc == CURLE_COULDNT_RESOLVE_PROXY;
  return ingero::make_error(where + ": " + (connect ? "cannot connect (" + what + ")" : what));
}

ingero::Result<std::string> ClickHouseClient::execute(const std::string& sql,
                                                      const Settings& settings) {
  std::string out;
  ChunkFn keep = [&](std::string_view c) {
    if (out.size() < (64u << 20)) out.append(c);
    return true;
  };
  if (auto st = perform(settings, sql, false, &keep, options_.request_timeout_ms); !st)
    return st.error();
  return out;
}

ingero::Status ClickHouseClient::learn_profile(int timeout_ms) {
  if (profile_readonly_ >= 0) return {};
  std::string value;
  ChunkFn keep = [&](std::string_view c) {
    value.append(c);
    return value.size() < 16;
  };
  // Asked with no setting at all: a read-only profile refuses any.
  auto st =
      perform({}, "SELECT value FROM system.settings WHERE name = 'readonly' FORMAT TabSeparated",
              false, &keep, timeout_ms);
  // A server that does not answer would not answer the read either: said now, once.
  if (!st && last_failure_ != Failure::kRejected) return st;
  profile_readonly_ = st && !value.empty() ? std::atoi(value.c_str()) : 0;
  profile_answered_ = st && value.size() >= 2 && value.back() == '\n' &&
                      value.find_first_not_of("0123456789") == value.size() - 1;
  return {};
}

ingero::Status ClickHouseClient::ping(int timeout_ms) {
  const bool asking = profile_readonly_ < 0;
  if (auto st = learn_profile(timeout_ms); !st) return st;
  // The profile's question just now was a round trip of its own: a second would add nothing.
  if (asking && profile_answered_) return {};
  std::string pong;
  auto st = stream(
      "SELECT 1 FORMAT TabSeparated", {{"readonly", "1"}},
      [&](std::string_view c) {
        pong.append(c);
        return pong.size() < 64;
      },
      timeout_ms);
  if (!st) return st;
  if (pong != "1\n")
    return ingero::make_error("ClickHouse at " + endpoint_.display() + " answered SELECT 1 with " +
                              engine::json_text(nlohmann::json(pong.substr(0, 40))) +
                              ": is it ClickHouse?");
  return {};
}

std::string trailing_exception(std::string_view tail) {
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.remove_suffix(1);
  size_t at = tail.rfind('\n');
  std::string_view line = at == std::string_view::npos ? tail : tail.substr(at + 1);
  if (line.rfind("Code: ", 0) != 0) return "";
  size_t digits = 6;
  while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits]))) ++digits;
  if (digits == 6 || line.find("DB::Exception", digits) == std::string_view::npos) return "";
  return std::string(line);
}

ingero::Status ClickHouseClient::stream(const std::string& sql, const Settings& settings,
                                        const ChunkFn& given, int timeout_ms) {
  if (auto st = learn_profile(timeout_ms); !st) return st;
  // The body's last bytes, where an exception after the rows would be (a whole body that read
  // as rows, exit 0: helper-66's 5.1M of 100M rows and a row "Code: 159, ...").
  constexpr size_t kTail = 4096;
  std::string tail;
  const ChunkFn on_chunk = [&](std::string_view chunk) {
    if (chunk.size() >= kTail) {
      tail.assign(chunk.substr(chunk.size() - kTail));
    } else {
      tail.append(chunk);
      if (tail.size() > 2 * kTail) tail.erase(0, tail.size() - kTail);
    }
    return given(chunk);
  };
  auto checked = [&](ingero::Status st) -> ingero::Status {
    if (!st) return st;
    if (std::string e = trailing_exception(tail); !e.empty())
      return ingero::make_error(
          "ClickHouse failed the statement after sending rows (they were "
          "cut short): " +
          e);
    return st;
  };
  const int readonly = profile_readonly_;
  if (readonly != 1) {
    // A readonly=2 profile may change any setting but readonly, which it holds already.
    Settings s = {{"enable_http_compression", "1"}};
    for (const auto& kv : settings)
      if (readonly == 0 || kv.first != "readonly") s.push_back(kv);
    return checked(perform(s, sql, false, &on_chunk, timeout_ms));
  }
  // A user whose profile is readonly=1, as fleet.md advises for readers, may change no setting,
  // not even a read's ("Cannot override setting (enable_http_compression) in readonly mode"):
  // every read failed. The server refuses that user's writes itself: the read goes with its
  // database alone, its format in the statement; its row limit and time are this client's (the
  // rows it reads, its timeout), and the format's own defaults stand (JSON quotes 64-bit
  // integers).
  Settings s;
  std::string body = sql;
  for (const auto& [k, v] : settings) {
    if (k == "database" || k == "query") {
      s.push_back({k, v});
    } else if (k == "default_format") {
      while (!body.empty() &&
             (std::isspace(static_cast<unsigned char>(body.back())) || body.back() == ';'))
        body.pop_back();
      body += "\nFORMAT " + v;
    }
  }
  return checked(perform(s, body, false, &on_chunk, timeout_ms));
}

ingero::Status ClickHouseClient::insert(const std::string& table, const std::string& columns,
                                        std::string_view body, size_t, std::string_view format) {
  Settings s = {{"query", "INSERT INTO " + endpoint_.database + "." + table + " (" + columns +
                              ") FORMAT " + std::string(format)}};
  if (!insert_prefix_.empty())
    s.push_back({"query_id", insert_prefix_ + std::to_string(++inserts_tagged_)});
  return perform(s, body, true, nullptr, options_.request_timeout_ms);
}

Settings read_only_settings(const std::string& database, const std::string& format, size_t max_rows,
                            int timeout_s) {
  return {{"database", database},
          {"default_format", format},
          {"output_format_json_quote_64bit_integers", "0"},
          {"max_execution_time", std::to_string(timeout_s)},
          {"max_result_rows", std::to_string(max_rows)},
          {"result_overflow_mode", "break"},
          {"readonly", "1"}};
}

}  // namespace ingero::fleet

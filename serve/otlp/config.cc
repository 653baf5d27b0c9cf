#include "serve/otlp/config.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <map>

namespace ingero::serve::otlp {
namespace {

constexpr const char* kSignalEnv[kSignals] = {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                                              "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
                                              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"};
constexpr const char* kSignalPath[kSignals] = {"v1/metrics", "v1/logs", "v1/traces"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int hi = i + 1 < s.size() ? hex(s[i + 1]) : -1, lo = i + 2 < s.size() ? hex(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) return std::nullopt;
    out += char(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) ||
          std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos))
      return false;
  return true;
}

// Checks http(s)://HOST[:PORT][/PATH]; the error names `what`.
ingero::Status check_url(const std::string& url, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return ingero::make_error(what + ": " + why + " in '" + url + "'");
  };
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return bad("expected http://HOST:PORT or https://HOST:PORT");
  std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https")
    return bad("the scheme must be http or https (OTLP/HTTP), not '" + scheme + "'");
  std::string rest = url.substr(scheme_end + 3);
  std::string authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != std::string::npos)
    return bad("a user name or password in the URL (put credentials in INGERO_OTLP_HEADERS)");
  std::string host = authority;
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    if (close == std::string::npos) return bad("an unclosed IPv6 address");
    std::string port = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!port.empty() && (port[0] != ':' || port.size() == 1 ||
                          port.find_first_not_of("0123456789", 1) != std::string::npos))
      return bad("a bad port");
  } else if (size_t colon = host.rfind(':'); colon != std::string::npos) {
    std::string port = host.substr(colon + 1);
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(port.substr(0, 6)) > 65535)
      return bad("a bad port");
    host.resize(colon);
  }
  if (host.empty()) return bad("no host");
  for (char c : url)
    if (static_cast<unsigned char>(c) <= ' ') return bad("a blank or control character");
  return {};
}

std::string join_path(std::string base, const char* path) {
  // The specification's rule: BASE + "/v1/metrics", with exactly one slash between them.
  size_t q = base.find_first_of("?#");
  if (q != std::string::npos) base.resize(q);
  if (base.empty() || base.back() != '/') base += '/';
  return base + path;
}

std::string display_of(const std::string& url) {
  size_t q = url.find_first_of("?#");
  return q == std::string::npos ? url : url.substr(0, q);
}

ingero::Status readable(const std::string& path, const char* var) {
  if (access(path.c_str(), R_OK) != 0)
    return ingero::Error::sys(std::string(var) + ": cannot read " + path, errno);
  return {};
}

}  // namespace

std::string_view signal_name(Signal s) {
  switch (s) {
    case Signal::kMetrics:
      return "metrics";
    case Signal::kLogs:
      return "logs";
    case Signal::kTraces:
      return "traces";
  }
  return "?";
}

EnvFn process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

ingero::Result<Headers> parse_key_values(std::string_view text) {
  Headers out;
  if (trim(text).empty()) return out;
  size_t index = 0;
  while (true) {
    ++index;
    size_t comma = text.find(',');
    std::string_view entry = trim(text.substr(0, comma));
    auto bad = [&](const std::string& why) {
      return ingero::make_error("entry " + std::to_string(index) + ": " + why);
    };
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) return bad("expected name=value");
    auto name = percent_decode(trim(entry.substr(0, eq)));
    auto value = percent_decode(trim(entry.substr(eq + 1)));
    if (!name || !value) return bad("a bad percent escape (%XX, two hex digits)");
    if (name->empty()) return bad("an empty name");
    for (char c : *name + *value)
      if (c == '\r' || c == '\n' || c == '\0') return bad("a CR, LF or NUL character");
    out.emplace_back(std::move(*name), std::move(*value));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

ingero::Result<Headers> parse_headers(std::string_view text) {
  auto kv = parse_key_values(text);
  if (!kv) return kv;
  for (size_t i = 0; i < kv->size(); ++i)
    if (!is_token((*kv)[i].first))
      return ingero::make_error("entry " + std::to_string(i + 1) + ": '" + (*kv)[i].first +
                                "' is not a valid header name");
  return kv;
}

ingero::Result<ExporterConfig> resolve_config(const std::string& endpoint, const EnvFn& env) {
  ExporterConfig c;
  std::string base = endpoint;
  std::string base_what = "--otlp";
  bool from_env = endpoint == "env";
  if (from_env) {
    // OTLP/HTTP with protobuf is what ingero sends. An environment set up for gRPC (the
    // OpenTelemetry operator's default: :4317) had HTTP sent to a gRPC port, and check said only
    // "no answer".
    for (const char* var :
         {"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
          "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"})
      if (auto p = env(var); p && !p->empty() && *p != "http/protobuf")
        return ingero::make_error(std::string(var) + "=" + *p +
                                  ": ingero exports OTLP/HTTP with protobuf only; set it to "
                                  "http/protobuf and the endpoint to the collector's HTTP port "
                                  "(4318 by default)");
    base = env("OTEL_EXPORTER_OTLP_ENDPOINT").value_or("");
    base_what = "OTEL_EXPORTER_OTLP_ENDPOINT";
    if (base.empty()) base = "http://localhost:4318";
  }
  if (auto st = check_url(base, base_what); !st) return st.error();
  c.display = display_of(base);
  for (size_t s = 0; s < kSignals; ++s) {
    c.urls[s] = join_path(base, kSignalPath[s]);
    if (!from_env) continue;
    auto own = env(kSignalEnv[s]);
    if (!own || own->empty()) continue;
    if (auto st = check_url(*own, kSignalEnv[s]); !st) return st.error();
    c.urls[s] = *own;
  }
  // Header lists: the OpenTelemetry variable first, ingero's own overriding it name by name.
  std::map<std::string, size_t> seen;  // lower-cased name -> index in c.headers
  for (const char* var : {"OTEL_EXPORTER_OTLP_HEADERS", "INGERO_OTLP_HEADERS"}) {
    auto text = env(var);
    if (!text) continue;
    auto h = parse_headers(*text);
    if (!h) return ingero::make_error(std::string(var) + ": " + h.error().message);
    for (auto& [name, value] : *h) {
      std::string key = name;
      for (auto& ch : key) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      if (auto it = seen.find(key); it != seen.end()) {
        c.headers[it->second].second = value;
      } else {
        seen[key] = c.headers.size();
        c.headers.emplace_back(name, value);
      }
    }
  }
  if (auto ca = env("OTEL_EXPORTER_OTLP_CERTIFICATE"); ca && !ca->empty()) {
    if (auto st = readable(*ca, "OTEL_EXPORTER_OTLP_CERTIFICATE"); !st) return st.error();
    c.ca_file = *ca;
  }
  auto cert = env("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE").value_or("");
  auto key = env("OTEL_EXPORTER_OTLP_CLIENT_KEY").value_or("");
  if (cert.empty() != key.empty())
    return ingero::make_error(
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together: "
        "set both or neither");
  if (!cert.empty()) {
    if (auto st = readable(cert, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"); !st) return st.error();
    if (auto st = readable(key, "OTEL_EXPORTER_OTLP_CLIENT_KEY"); !st) return st.error();
    c.client_cert = cert;
    c.client_key = key;
  }
  if (auto comp = env("OTEL_EXPORTER_OTLP_COMPRESSION"); comp && !comp->empty()) {
    if (*comp == "gzip")
      c.gzip = true;
    else if (*comp != "none")
      return ingero::make_error("OTEL_EXPORTER_OTLP_COMPRESSION: expected gzip or none, not '" +
                                *comp + "'");
  }
  if (auto t = env("OTEL_EXPORTER_OTLP_TIMEOUT"); t && !t->empty()) {
    bool digits = t->size() <= 9 && t->find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stol(*t) <= 0)
      return ingero::make_error(
          "OTEL_EXPORTER_OTLP_TIMEOUT: expected a positive number of milliseconds, not '" + *t +
          "'");
    c.timeout = std::chrono::milliseconds(std::stol(*t));
  }
  return c;
}

}  // namespace ingero::serve::otlp

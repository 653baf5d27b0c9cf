#include "serve/http/web_config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace ingero::serve::http {

namespace {

namespace fs = std::filesystem;

struct Ctx {
  std::string name, base_dir;
  Error err(const std::string& key, const std::string& why) const {
    return make_error(name + ": " + key + ": " + why);
  }
};

Result<std::string> scalar(const Ctx& c, const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) return c.err(key, "must be a string");
  return n.as<std::string>();
}

std::string resolve(const Ctx& c, const std::string& file) {
  if (file.empty() || fs::path(file).is_absolute()) return file;
  return (fs::path(c.base_dir) / file).string();
}

Result<TlsVersion> tls_version(const Ctx& c, const YAML::Node& n, const std::string& key) {
  auto s = scalar(c, n, key);
  if (!s) return s.error();
  if (*s == "TLS12") return TlsVersion::tls12;
  if (*s == "TLS13") return TlsVersion::tls13;
  if (*s == "TLS10" || *s == "TLS11")
    return c.err(key, *s + " is not supported: ingero serves TLS 1.2 and 1.3 only");
  return c.err(key, "'" + *s + "' is not one of TLS12, TLS13");
}

Result<std::optional<TlsOptions>> parse_tls(const Ctx& c, const YAML::Node& n) {
  const std::string p = "tls_server_config";
  if (n.IsNull()) return std::optional<TlsOptions>();
  if (!n.IsMap()) return c.err(p, "must be a mapping");
  TlsOptions t;
  bool client_auth_set = false;
  for (const auto& kv : n) {
    std::string key = kv.first.as<std::string>();
    std::string full = p + "." + key;
    const YAML::Node& v = kv.second;
    if (key == "cert_file" || key == "key_file" || key == "client_ca_file") {
      auto s = scalar(c, v, full);
      if (!s) return s.error();
      std::string path = resolve(c, *s);
      (key == "cert_file" ? t.cert_file : key == "key_file" ? t.key_file : t.client_ca_file) = path;
    } else if (key == "client_auth_type") {
      auto s = scalar(c, v, full);
      if (!s) return s.error();
      client_auth_set = true;
      if (*s == "NoClientCert")
        t.client_auth = ClientAuth::none;
      else if (*s == "VerifyClientCertIfGiven")
        t.client_auth = ClientAuth::verify_if_given;
      else if (*s == "RequireAndVerifyClientCert")
        t.client_auth = ClientAuth::require_and_verify;
      else if (*s == "RequestClientCert" || *s == "RequireAnyClientCert")
        return c.err(full, *s + " accepts certificates without verifying them; ingero supports "
                                "RequireAndVerifyClientCert, VerifyClientCertIfGiven, "
                                "NoClientCert");
      else
        return c.err(full, "unknown client auth type '" + *s + "'");
    } else if (key == "min_version" || key == "max_version") {
      auto ver = tls_version(c, v, full);
      if (!ver) return ver.error();
      (key == "min_version" ? t.min_version : t.max_version) = *ver;
    } else if (key == "prefer_server_cipher_suites") {
      // ingero always prefers the server's order; `false` cannot be honoured.
      if (!v.IsScalar() || v.as<std::string>() != "true")
        return c.err(full, "only true is supported (the server's order is always preferred)");
    } else if (key == "cert" || key == "key" || key == "client_ca" || key == "cipher_suites" ||
               key == "curve_preferences" || key == "client_allowed_sans") {
      return c.err(full,
                   "not supported by ingero (use cert_file, key_file, client_ca_file; "
                   "OpenSSL's default ciphers and curves are used)");
    } else {
      return c.err(full, "unknown key");
    }
  }
  if (t.cert_file.empty() && t.key_file.empty()) {
    if (client_auth_set || !t.client_ca_file.empty())
      return c.err(p, "client certificates need cert_file and key_file too");
    return std::optional<TlsOptions>();  // as in Prometheus: no certificate, no TLS
  }
  if (t.cert_file.empty()) return c.err(p, "missing cert_file");
  if (t.key_file.empty()) return c.err(p, "missing key_file");
  if (t.client_auth != ClientAuth::none && t.client_ca_file.empty())
    return c.err(p, "client_auth_type needs client_ca_file");
  if (t.client_auth == ClientAuth::none && !t.client_ca_file.empty())
    return c.err(p, "client_ca_file is set but client_auth_type is NoClientCert");
  if (t.min_version == TlsVersion::tls13 && t.max_version == TlsVersion::tls12)
    return c.err(p, "min_version is above max_version");
  return std::optional<TlsOptions>(t);
}

Status parse_headers(const Ctx& c, const YAML::Node& n, WebConfig& out) {
  const std::string p = "http_server_config.headers";
  if (n.IsNull()) return {};
  if (!n.IsMap()) return c.err(p, "must be a mapping");
  static const std::set<std::string> kAllowed = {"Content-Security-Policy", "X-Frame-Options",
                                                 "X-Content-Type-Options", "X-XSS-Protection",
                                                 "Strict-Transport-Security"};
  for (const auto& kv : n) {
    std::string name = kv.first.as<std::string>();
    std::string full = p + "." + name;
    if (!kAllowed.count(name)) return c.err(full, "not a header this file may set");
    auto v = scalar(c, kv.second, full);
    if (!v) return v.error();
    if (v->empty()) continue;  // "unset if blank"
    if (name == "X-Frame-Options" && !iequals(*v, "deny") && !iequals(*v, "sameorigin"))
      return c.err(full, "must be deny or sameorigin");
    if (name == "X-Content-Type-Options" && !iequals(*v, "nosniff"))
      return c.err(full, "must be nosniff");
    if (v->find_first_of("\r\n") != std::string::npos) return c.err(full, "holds a line break");
    out.headers.emplace_back(name, *v);
  }
  return {};
}

Status parse_http(const Ctx& c, const YAML::Node& n, WebConfig& out) {
  if (n.IsNull()) return {};
  if (!n.IsMap()) return c.err("http_server_config", "must be a mapping");
  for (const auto& kv : n) {
    std::string key = kv.first.as<std::string>();
    if (key == "headers") {
      if (auto st = parse_headers(c, kv.second, out); !st) return st;
    } else if (key == "http2") {
      // HTTP/2 is negotiated only over TLS (ALPN); ingero does not offer it, so clients use
      // HTTP/1.1. Either value is accepted.
      if (!kv.second.IsScalar()) return c.err("http_server_config.http2", "must be a boolean");
    } else {
      return c.err("http_server_config." + key, "unknown key");
    }
  }
  return {};
}

}  // namespace

Result<WebConfig> parse_web_config(const std::string& yaml, const std::string& base_dir,
                                   const std::string& name) {
  Ctx c{name, base_dir};
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return make_error(name + ": not valid YAML (line " + std::to_string(e.mark.line + 1) +
                      "): " + e.msg);
  }
  WebConfig out;
  if (root.IsNull()) return out;  // an empty file: plain HTTP, no auth (as in Prometheus)
  if (!root.IsMap()) return make_error(name + ": the top level must be a mapping");
  try {
    for (const auto& kv : root) {
      std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "tls_server_config") {
        auto t = parse_tls(c, v);
        if (!t) return t.error();
        out.tls = *t;
      } else if (key == "http_server_config") {
        if (auto st = parse_http(c, v, out); !st) return st.error();
      } else if (key == "basic_auth_users") {
        if (v.IsNull()) continue;
        if (!v.IsMap()) return c.err(key, "must be a mapping of user: bcrypt hash");
        for (const auto& u : v) {
          std::string user = u.first.as<std::string>();
          auto hash = scalar(c, u.second, key + "." + user);
          if (!hash) return hash.error();
          if (!bcrypt_hash_valid(*hash))
            return c.err(key + "." + user,
                         "not a bcrypt hash (make one with htpasswd -nBC 10 \"\" | tr -d ':\\n')");
          out.basic_auth_users[user] = *hash;
        }
      } else if (key == "rate_limit") {
        return c.err(key, "not supported by ingero (connections per client are capped instead)");
      } else {
        return c.err(key, "unknown key");
      }
    }
  } catch (const YAML::Exception& e) {
    return make_error(name + ": " + e.what());
  }
  return out;
}

Result<WebConfig> load_web_config(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return make_error("web config " + path + " does not exist");
  if (fs::is_directory(path, ec)) return make_error("web config " + path + " is a directory");
  // It says who may log in: a file others may write lets them choose (a mode-0666 file was taken
  // without a word).
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH))) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    return make_error("web config " + path + " is writable by others (mode " + mode +
                      "): whoever can write it chooses who may log in (chmod go-w " + path + ")");
  }
  std::ifstream in(path);
  if (!in) return Error::sys("cannot read web config " + path, errno);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string dir = fs::path(path).parent_path().string();
  return parse_web_config(ss.str(), dir.empty() ? "." : dir, "web config " + path);
}

Status apply_web_config(const WebConfig& config, ServerOptions& options, const std::string& realm) {
  options.tls = config.tls;
  if (!config.basic_auth_users.empty()) {
    auto a = BasicAuth::create(config.basic_auth_users, realm);
    if (!a) return a.error();
    options.auth = *a;
  }
  for (const auto& h : config.headers) options.response_headers.push_back(h);
  return {};
}

}  // namespace ingero::serve::http

// Streamable HTTP transport (MCP 2025-06-18 / 2025-11-25): one endpoint, /mcp.
//   POST    a JSON-RPC message. Requests get application/json, or text/event-stream when the
//           request produced notifications (log messages) and the client accepts SSE.
//           Notifications and responses get 202.
//   DELETE  ends the session named by MCP-Session-Id.
//   GET     405: this server sends nothing unprompted.
// Every request passes, in order: Host check (DNS rebinding), Origin check, bearer token,
// session and protocol-version headers. One request per connection (Connection: close), so
// an idle client never holds a worker.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <set>

#include "serve/mcp/transport.h"

namespace ingero::serve::mcp {

namespace {

constexpr size_t kMaxHeaderBytes = 16 << 10;
constexpr int kIoTimeoutMs = 10000;

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  if (!e) return "unknown TLS error";
  char b[256];
  ERR_error_string_n(e, b, sizeof b);
  return b;
}

// The hostname part of a Host header or an Origin's authority: "[::1]:8081" -> "[::1]".
std::string host_of(const std::string& authority) {
  if (!authority.empty() && authority[0] == '[') {
    size_t e = authority.find(']');
    return lower(e == std::string::npos ? authority : authority.substr(0, e + 1));
  }
  return lower(authority.substr(0, authority.find(':')));
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  ~Conn() {
    if (ssl) {
      SSL_shutdown(ssl);
      SSL_free(ssl);
    }
    if (fd >= 0) close(fd);
  }
  ssize_t read(char* b, size_t n) {
    if (ssl) {
      int r = SSL_read(ssl, b, int(n));
      return r > 0 ? r : -1;
    }
    while (true) {
      ssize_t r = ::recv(fd, b, n, 0);
      if (r < 0 && errno == EINTR) continue;
      return r;
    }
  }
  bool write_all(const std::string& s) {
    for (size_t off = 0; off < s.size();) {
      ssize_t r;
      if (ssl) {
        int w = SSL_write(ssl, s.data() + off, int(s.size() - off));
        r = w > 0 ? w : -1;
      } else {
        r = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR) continue;
      }
      if (r <= 0) return false;
      off += size_t(r);
    }
    return true;
  }
};

struct Request {
  std::string method, target, path, version;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& k) const {
    auto it = headers.find(k);
    return it == headers.end() ? "" : it->second;
  }
};

struct Response {
  int status = 200;
  std::string reason = "OK";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

Response plain(int status, const std::string& reason, const std::string& text) {
  Response r;
  r.status = status;
  r.reason = reason;
  r.headers.push_back({"Content-Type", "text/plain; charset=utf-8"});
  r.body = text + "\n";
  return r;
}

Response rpc_error(int status, const std::string& reason, int code, const std::string& msg) {
  Response r;
  r.status = status;
  r.reason = reason;
  r.headers.push_back({"Content-Type", "application/json"});
  r.body = Json{{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", code}, {"message", msg}}}}
               .dump();
  return r;
}

// Reads one request; an error Response when it is malformed or too large.
std::variant<Request, Response> read_request(Conn& c) {
  std::string buf;
  char chunk[16384];
  size_t hend;
  while ((hend = buf.find("\r\n\r\n")) == std::string::npos) {
    if (buf.size() > kMaxHeaderBytes)
      return plain(431, "Request Header Fields Too Large", "headers too large");
    ssize_t n = c.read(chunk, sizeof chunk);
    if (n <= 0) return plain(400, "Bad Request", "incomplete request");
    buf.append(chunk, size_t(n));
  }
  Request r;
  size_t eol = buf.find("\r\n");
  std::string line = buf.substr(0, eol);
  size_t a = line.find(' '), b = line.rfind(' ');
  if (a == std::string::npos || b == a) return plain(400, "Bad Request", "malformed request line");
  r.method = line.substr(0, a);
  r.target = line.substr(a + 1, b - a - 1);
  r.version = line.substr(b + 1);
  if (r.version != "HTTP/1.1" && r.version != "HTTP/1.0")
    return plain(505, "HTTP Version Not Supported", "HTTP/1.1 only");
  r.path = r.target.substr(0, r.target.find('?'));
  for (size_t pos = eol + 2; pos < hend;) {
    size_t e = buf.find("\r\n", pos);
    std::string h = buf.substr(pos, e - pos);
    pos = e + 2;
    size_t colon = h.find(':');
    if (colon == std::string::npos || colon == 0)
      return plain(400, "Bad Request", "malformed header");
    std::string name = lower(h.substr(0, colon));
    std::string value = trim(h.substr(colon + 1));
    // Duplicate Host or Content-Length headers are a smuggling vector: refuse.
    if ((name == "host" || name == "content-length") && r.headers.count(name))
      return plain(400, "Bad Request", "duplicate " + name + " header");
    if (r.headers.count(name))
      r.headers[name] += ", " + value;
    else
      r.headers[name] = value;
  }
  std::string rest = buf.substr(hend + 4);
  std::string te = lower(r.header("transfer-encoding"));
  if (!te.empty() && te != "chunked")
    return plain(501, "Not Implemented", "unsupported transfer-encoding");
  if (te == "chunked") {
    if (r.headers.count("content-length"))
      return plain(400, "Bad Request", "both content-length and chunked");
    // Decode as data arrives.
    std::string raw = rest;
    size_t pos = 0;
    while (true) {
      size_t le;
      while ((le = raw.find("\r\n", pos)) == std::string::npos) {
        if (raw.size() - pos > 64) return plain(400, "Bad Request", "bad chunk header");
        ssize_t n = c.read(chunk, sizeof chunk);
        if (n <= 0) return plain(400, "Bad Request", "incomplete body");
        raw.append(chunk, size_t(n));
      }
      char* end = nullptr;
      std::string hexs = raw.substr(pos, le - pos);
      unsigned long long size = std::strtoull(hexs.c_str(), &end, 16);
      if (hexs.empty() || (end && *end && *end != ';'))
        return plain(400, "Bad Request", "bad chunk size");
      if (r.body.size() + size > kMaxMessageBytes)
        return plain(413, "Content Too Large", "body too large");
      pos = le + 2;
      while (raw.size() < pos + size + 2) {
        ssize_t n = c.read(chunk, sizeof chunk);
        if (n <= 0) return plain(400, "Bad Request", "incomplete body");
        raw.append(chunk, size_t(n));
      }
      if (size == 0) break;
      r.body.append(raw, pos, size);
      pos += size + 2;
    }
    return r;
  }
  std::string cl = r.header("content-length");
  size_t want = 0;
  if (!cl.empty()) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(cl.c_str(), &end, 10);
    if (!end || *end || cl.find_first_not_of("0123456789") != std::string::npos)
      return plain(400, "Bad Request", "bad content-length");
    if (v > kMaxMessageBytes)
      return plain(413, "Content Too Large",
                   "body exceeds " + std::to_string(kMaxMessageBytes) + " bytes");
    want = size_t(v);
  }
  r.body = rest.substr(0, std::min(rest.size(), want));
  while (r.body.size() < want) {
    ssize_t n = c.read(chunk, std::min(sizeof chunk, want - r.body.size()));
    if (n <= 0) return plain(400, "Bad Request", "incomplete body");
    r.body.append(chunk, size_t(n));
  }
  return r;
}

std::string serialize(const Response& r) {
  std::string s = "HTTP/1.1 " + std::to_string(r.status) + " " + r.reason + "\r\n";
  for (const auto& [k, v] : r.headers) s += k + ": " + v + "\r\n";
  s += "Content-Length: " + std::to_string(r.body.size()) +
       "\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n";
  return s + r.body;
}

std::string new_session_id() {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof b) != 1) throw std::runtime_error("no randomness for a session id");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

}  // namespace

struct HttpServer::Impl {
  Server& server;
  HttpOptions opts;
  int listen_fd = -1;
  SSL_CTX* tls = nullptr;
  std::set<std::string> hosts;  // accepted Host / Origin hostnames
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Session>> sessions;

  Impl(Server& s, HttpOptions o) : server(s), opts(std::move(o)) {}
  ~Impl() {
    if (listen_fd >= 0) close(listen_fd);
    if (tls) SSL_CTX_free(tls);
  }

  bool origin_allowed(const std::string& origin) {
    if (origin.empty()) return true;  // not a browser
    for (const auto& o : opts.allow_origins)
      if (origin == o) return true;
    size_t scheme = origin.find("://");
    if (scheme == std::string::npos) return false;
    std::string s = lower(origin.substr(0, scheme));
    if (s != "http" && s != "https") return false;
    return hosts.count(host_of(origin.substr(scheme + 3))) > 0;
  }

  std::shared_ptr<Session> find_session(const std::string& id) {
    std::lock_guard<std::mutex> g(mu);
    auto it = sessions.find(id);
    return it == sessions.end() ? nullptr : it->second;
  }

  std::shared_ptr<Session> add_session() {
    auto s = std::make_shared<Session>();
    s->id = new_session_id();
    std::lock_guard<std::mutex> g(mu);
    auto now = std::chrono::steady_clock::now();
    for (auto it = sessions.begin(); it != sessions.end();)
      it = now - it->second->last_used > std::chrono::hours(1) ? sessions.erase(it) : std::next(it);
    if (sessions.size() >= opts.max_sessions) {
      auto oldest = std::min_element(sessions.begin(), sessions.end(), [](auto& a, auto& b) {
        return a.second->last_used < b.second->last_used;
      });
      sessions.erase(oldest);
    }
    sessions[s->id] = s;
    return s;
  }

  Response handle(const Request& rq) {
    if (rq.path != "/mcp") return plain(404, "Not Found", "the MCP endpoint is /mcp");
    std::string host = rq.header("host");
    if (host.empty()) return plain(400, "Bad Request", "missing Host header");
    if (!hosts.count(host_of(host)))
      return plain(403, "Forbidden",
                   "Host " + host_of(host) +
                       " is not accepted (DNS rebinding protection; see --allow-host)");
    if (!origin_allowed(rq.header("origin")))
      return plain(403, "Forbidden", "Origin is not accepted (see --allow-origin)");
    if (!opts.token.empty()) {
      std::string auth = rq.header("authorization");
      if (auth.size() < 7 || lower(auth.substr(0, 7)) != "bearer " ||
          !constant_time_equal(auth.substr(7), opts.token)) {
        Response r = plain(401, "Unauthorized", "a bearer token is required");
        r.headers.push_back({"WWW-Authenticate", "Bearer realm=\"ingero\""});
        return r;
      }
    }
    std::string sid = rq.header("mcp-session-id");
    if (rq.method == "DELETE") {
      if (sid.empty()) return plain(400, "Bad Request", "missing MCP-Session-Id");
      std::lock_guard<std::mutex> g(mu);
      if (!sessions.erase(sid)) return plain(404, "Not Found", "unknown session");
      return plain(200, "OK", "session ended");
    }
    if (rq.method != "POST") {
      Response r = plain(405, "Method Not Allowed",
                         "POST JSON-RPC messages to /mcp; this server opens no SSE stream");
      r.headers.push_back({"Allow", "POST, DELETE"});
      return r;
    }
    std::string ct = lower(rq.header("content-type"));
    if (ct.rfind("application/json", 0) != 0)
      return plain(415, "Unsupported Media Type", "Content-Type must be application/json");
    std::string accept = lower(rq.header("accept"));
    bool sse_ok = accept.find("text/event-stream") != std::string::npos;
    if (!accept.empty() && accept.find("application/json") == std::string::npos && !sse_ok &&
        accept.find("*/*") == std::string::npos)
      return plain(406, "Not Acceptable",
                   "Accept must include application/json and text/event-stream");
    if (rq.body.size() > kMaxMessageBytes || json_depth(rq.body) > kMaxJsonDepth)
      return rpc_error(400, "Bad Request", kInvalidRequest,
                       "message too large or nested too deeply");
    Json msg = Json::parse(rq.body, nullptr, false);
    if (msg.is_discarded())
      return rpc_error(400, "Bad Request", kParseError, "Parse error: not valid JSON");
    std::shared_ptr<Session> session;
    bool fresh = false;
    if (Server::is_initialize(msg)) {
      session = add_session();
      fresh = true;
    } else {
      if (sid.empty())
        return rpc_error(400, "Bad Request", kInvalidRequest,
                         "Bad Request: missing MCP-Session-Id header");
      session = find_session(sid);
      if (!session)
        return rpc_error(404, "Not Found", kInvalidRequest, "Session not found: initialize again");
      std::string pv = rq.header("mcp-protocol-version");
      const auto& sv = supported_versions();
      if (!pv.empty() && std::find(sv.begin(), sv.end(), pv) == sv.end())
        return rpc_error(400, "Bad Request", kInvalidRequest,
                         "Unsupported MCP-Protocol-Version: " + pv);
    }
    std::vector<Json> notes;
    std::mutex notes_mu;
    Notify notify = [&](const Json& n) {
      std::lock_guard<std::mutex> g(notes_mu);
      if (notes.size() < 100) notes.push_back(n);
    };
    auto out = server.handle_message(msg, *session, notify);
    if (fresh && (!out || out->contains("error"))) {
      std::lock_guard<std::mutex> g(mu);
      sessions.erase(session->id);
      fresh = false;
    }
    Response r;
    if (fresh) r.headers.push_back({"MCP-Session-Id", session->id});
    if (!out) {
      r.status = 202;
      r.reason = "Accepted";
      return r;
    }
    if (sse_ok && !notes.empty()) {
      r.headers.push_back({"Content-Type", "text/event-stream"});
      for (const auto& n : notes)
        r.body +=
            "event: message\ndata: " + n.dump(-1, ' ', false, Json::error_handler_t::replace) +
            "\n\n";
      r.body +=
          "event: message\ndata: " + out->dump(-1, ' ', false, Json::error_handler_t::replace) +
          "\n\n";
    } else {
      r.headers.push_back({"Content-Type", "application/json"});
      r.body = out->dump(-1, ' ', false, Json::error_handler_t::replace);
    }
    return r;
  }

  void serve(int fd) {
    Conn c;
    c.fd = fd;
    timeval tv{kIoTimeoutMs / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (tls) {
      c.ssl = SSL_new(tls);
      SSL_set_fd(c.ssl, fd);
      if (SSL_accept(c.ssl) != 1) {
        ERR_clear_error();
        return;  // not TLS, or a failed handshake: nothing to answer
      }
    }
    auto parsed = read_request(c);
    Response r = std::holds_alternative<Response>(parsed) ? std::get<Response>(parsed)
                                                          : handle(std::get<Request>(parsed));
    c.write_all(serialize(r));
  }
};

HttpServer::HttpServer(Server& server, HttpOptions opts)
    : impl_(std::make_unique<Impl>(server, std::move(opts))) {}
HttpServer::~HttpServer() = default;

ingero::Status HttpServer::start() {
  auto& o = impl_->opts;
  std::string host = "127.0.0.1", port = o.addr;
  if (size_t colon = o.addr.rfind(':'); colon != std::string::npos) {
    host = o.addr.substr(0, colon);
    port = o.addr.substr(colon + 1);
    if (host.empty()) host = "127.0.0.1";  // ":8081" stays on loopback
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos)
    return ingero::make_error("bad --http address '" + o.addr + "' (use 127.0.0.1:8081 or :8081)");
  if (o.tls_cert.empty() != o.tls_key.empty())
    return ingero::make_error("--tls-cert and --tls-key go together");
  if (!o.tls_cert.empty()) {
    impl_->tls = SSL_CTX_new(TLS_server_method());
    if (!impl_->tls) return ingero::make_error("TLS: " + openssl_error());
    SSL_CTX_set_min_proto_version(impl_->tls, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(impl_->tls, o.tls_cert.c_str()) != 1)
      return ingero::make_error("TLS: cannot load certificate " + o.tls_cert + ": " +
                                openssl_error());
    if (SSL_CTX_use_PrivateKey_file(impl_->tls, o.tls_key.c_str(), SSL_FILETYPE_PEM) != 1) {
      std::string e = openssl_error();
      if (e.find("mismatch") != std::string::npos)
        return ingero::make_error("TLS: the key " + o.tls_key + " does not match the certificate " +
                                  o.tls_cert);
      return ingero::make_error("TLS: cannot load key " + o.tls_key + ": " + e);
    }
    if (SSL_CTX_check_private_key(impl_->tls) != 1)
      return ingero::make_error("TLS: the key does not match the certificate");
  }
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return ingero::make_error("cannot resolve " + host + ": " + gai_strerror(rc));
  std::string err = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      impl_->listen_fd = fd;
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
      break;
    }
    err = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(res);
  if (impl_->listen_fd < 0) return ingero::make_error("cannot listen on " + o.addr + ": " + err);
  auto& h = impl_->hosts;
  for (const char* l : {"localhost", "127.0.0.1", "[::1]"}) h.insert(l);
  bool wildcard = host == "0.0.0.0" || host == "::";
  if (!wildcard) h.insert(lower(host.find(':') != std::string::npos ? "[" + host + "]" : host));
  for (const auto& x : o.allow_hosts) h.insert(lower(x));
  std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  url_ = std::string(impl_->tls ? "https" : "http") + "://" + (wildcard ? "127.0.0.1" : shown) +
         ":" + std::to_string(port_) + "/mcp";
  return {};
}

int HttpServer::run(std::atomic<bool>& stop) {
  ThreadPool pool(impl_->opts.threads, 256);
  while (!stop) {
    pollfd p{impl_->listen_fd, POLLIN, 0};
    int r = poll(&p, 1, 200);
    if (r <= 0) continue;
    int fd = accept4(impl_->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (!pool.try_submit([this, fd] { impl_->serve(fd); })) {
      Conn c;
      c.fd = fd;
      if (!impl_->tls) c.write_all(serialize(plain(503, "Service Unavailable", "busy, retry")));
    }
  }
  pool.drain();
  return 0;
}

}  // namespace ingero::serve::mcp

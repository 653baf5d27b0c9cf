#include "tests/unit/http/test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

namespace ingero::serve::http::test {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int ms_until(std::chrono::steady_clock::time_point t) {
  auto d =
      std::chrono::duration_cast<std::chrono::milliseconds>(t - std::chrono::steady_clock::now());
  return int(std::max<int64_t>(0, d.count()));
}

}  // namespace

Conn::Conn(uint16_t port, const std::string& source, const TlsClient* tls) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error_ = std::string("socket: ") + std::strerror(errno);
    return;
  }
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &src.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
    error_ = std::string("bind ") + source + ": " + std::strerror(errno);
    ::close(fd);
    return;
  }
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    error_ = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  socklen_t len = sizeof src;
  getsockname(fd, reinterpret_cast<sockaddr*>(&src), &len);
  local_port_ = ntohs(src.sin_port);
  fd_ = fd;
  if (!tls) return;
  ctx_ = SSL_CTX_new(TLS_client_method());
  if (!tls->ca_file.empty()) {
    SSL_CTX_load_verify_locations(ctx_, tls->ca_file.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  }
  if (!tls->cert_file.empty()) {
    SSL_CTX_use_certificate_chain_file(ctx_, tls->cert_file.c_str());
    SSL_CTX_use_PrivateKey_file(ctx_, tls->key_file.c_str(), SSL_FILETYPE_PEM);
  }
  ssl_ = SSL_new(ctx_);
  SSL_set_fd(ssl_, fd_);
  SSL_set1_host(ssl_, "127.0.0.1");
  if (SSL_connect(ssl_) != 1) {
    char b[256];
    ERR_error_string_n(ERR_get_error(), b, sizeof b);
    error_ = std::string("TLS handshake: ") + b;
    close();
  }
}

Conn::~Conn() { close(); }

Conn::Conn(Conn&& o) noexcept
    : fd_(o.fd_),
      ctx_(o.ctx_),
      ssl_(o.ssl_),
      in_(std::move(o.in_)),
      error_(std::move(o.error_)),
      eof_(o.eof_),
      local_port_(o.local_port_) {
  o.fd_ = -1;
  o.ctx_ = nullptr;
  o.ssl_ = nullptr;
}

void Conn::close() {
  if (ssl_) SSL_free(ssl_);
  if (ctx_) SSL_CTX_free(ctx_);
  ssl_ = nullptr;
  ctx_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Conn::send(std::string_view data) {
  if (fd_ < 0) return false;
  while (!data.empty()) {
    ssize_t n;
    if (ssl_) {
      int w = SSL_write(ssl_, data.data(), int(data.size()));
      n = w > 0 ? w : -1;
    } else {
      n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
    }
    if (n <= 0) return false;
    data.remove_prefix(size_t(n));
  }
  return true;
}

bool Conn::fill(std::chrono::steady_clock::time_point until) {
  if (fd_ < 0 || eof_) return false;
  char buf[16384];
  while (true) {
    if (!(ssl_ && SSL_pending(ssl_) > 0)) {
      pollfd p{fd_, POLLIN, 0};
      int r = poll(&p, 1, ms_until(until));
      if (r == 0) return false;  // timeout
      if (r < 0) {
        if (errno == EINTR) continue;
        return false;
      }
    }
    ssize_t n;
    if (ssl_) {
      int r = SSL_read(ssl_, buf, sizeof buf);
      if (r <= 0) {
        int e = SSL_get_error(ssl_, r);
        if (e == SSL_ERROR_WANT_READ) continue;
        ERR_clear_error();
        eof_ = true;
        return false;
      }
      n = r;
    } else {
      n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof_ = true;
        return false;
      }
    }
    in_.append(buf, size_t(n));
    return true;
  }
}

Reply Conn::read_response(std::chrono::milliseconds timeout) {
  Reply r;
  auto until = std::chrono::steady_clock::now() + timeout;
  size_t hend;
  while ((hend = in_.find("\r\n\r\n")) == std::string::npos)
    if (!fill(until)) {
      r.error = eof_ ? "closed before a response" : "timeout waiting for a response";
      return r;
    }
  std::string head = in_.substr(0, hend);
  in_.erase(0, hend + 4);
  size_t eol = head.find("\r\n");
  std::string line = head.substr(0, eol);
  if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12) {
    r.error = "bad status line: " + line;
    return r;
  }
  int status = std::stoi(line.substr(9, 3));
  for (size_t pos = eol == std::string::npos ? head.size() : eol + 2; pos < head.size();) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string h = head.substr(pos, e - pos);
    pos = e + 2;
    size_t c = h.find(':');
    if (c == std::string::npos) continue;
    std::string v = h.substr(c + 1);
    while (!v.empty() && v.front() == ' ') v.erase(0, 1);
    r.headers[lower(h.substr(0, c))] = v;
  }
  if (status == 100) {  // interim: the real response follows
    return read_response(std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now()));
  }
  auto te = r.headers.find("transfer-encoding");
  if (te != r.headers.end() && lower(te->second) == "chunked") {
    while (true) {
      size_t le;
      while ((le = in_.find("\r\n")) == std::string::npos)
        if (!fill(until)) {
          r.error = "incomplete chunk header";
          return r;
        }
      size_t n = std::stoul(in_.substr(0, le), nullptr, 16);
      while (in_.size() < le + 2 + n + 2)
        if (!fill(until)) {
          r.error = "incomplete chunk";
          return r;
        }
      r.raw_body += in_.substr(0, le + 2 + n + 2);
      r.body += in_.substr(le + 2, n);
      in_.erase(0, le + 2 + n + 2);
      if (n == 0) break;
    }
  } else if (r.headers.count("content-length")) {
    size_t n = std::stoul(r.headers["content-length"]);
    while (in_.size() < n)
      if (!fill(until)) {
        r.error = "incomplete body";
        return r;
      }
    r.body = in_.substr(0, n);
    in_.erase(0, n);
  } else {
    while (fill(until)) {
    }
    r.body = std::move(in_);
    in_.clear();
  }
  r.raw_body = r.raw_body.empty() ? r.body : r.raw_body;
  r.status = status;
  return r;
}

std::string Conn::read_until(std::string_view delim, std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  size_t at;
  while ((at = in_.find(delim)) == std::string::npos)
    if (!fill(until)) return "";
  std::string out = in_.substr(0, at + delim.size());
  in_.erase(0, at + delim.size());
  return out;
}

bool Conn::wait_closed(std::chrono::milliseconds timeout, std::string* got) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!eof_) {
    if (!fill(until) && !eof_) break;
  }
  if (got) *got += in_;
  in_.clear();
  return eof_;
}

bool Conn::closed_now() { return wait_closed(0ms); }

std::string request_text(std::string_view method, std::string_view target,
                         const std::map<std::string, std::string>& headers, std::string_view body) {
  std::string s = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\n";
  bool host = false;
  for (const auto& [k, v] : headers) {
    if (lower(k) == "host") host = true;
    s += k + ": " + v + "\r\n";
  }
  if (!host) s += "Host: 127.0.0.1\r\n";
  if (!body.empty()) s += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  s += "\r\n";
  s += body;
  return s;
}

Reply request(uint16_t port, std::string_view method, std::string_view target,
              const std::map<std::string, std::string>& headers, std::string_view body,
              const TlsClient* tls) {
  Conn c(port, "127.0.0.1", tls);
  if (!c.ok()) return Reply{0, {}, {}, {}, c.error()};
  if (!c.send(request_text(method, target, headers, body))) return Reply{0, {}, {}, {}, "send"};
  return c.read_response();
}

void raise_fd_limit() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = size_t(std::ceil(p / 100.0 * double(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace ingero::serve::http::test

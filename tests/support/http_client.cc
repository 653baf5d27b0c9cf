#include "tests/support/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <random>
#include <set>

namespace ingero::test {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Decodes a chunked body; false if it is not well formed.
bool dechunk(const std::string& in, std::string* out) {
  size_t pos = 0;
  out->clear();
  while (true) {
    size_t eol = in.find("\r\n", pos);
    if (eol == std::string::npos) return false;
    size_t n = std::stoul(in.substr(pos, eol - pos), nullptr, 16);
    pos = eol + 2;
    if (n == 0) return true;
    if (pos + n > in.size()) return false;
    out->append(in, pos, n);
    pos += n + 2;
  }
}

}  // namespace

std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string o;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      o += char(c);
    } else {
      o += '%';
      o += hex[c >> 4];
      o += hex[c & 15];
    }
  }
  return o;
}

int free_tcp_port() {
  // A port below the kernel's ephemeral range (32768-60999 by default): a port the kernel
  // hands out could be taken as the local port of any outgoing connection (another test's
  // HTTP client) between this check and the server's bind. Bindable on every interface, with
  // the TIME_WAIT tolerance servers use (SO_REUSEADDR).
  static std::mt19937 rng(uint32_t(getpid()) * 2654435761u ^ uint32_t(time(nullptr)));
  static std::mutex mu;
  static std::set<int> given;
  std::lock_guard lk(mu);
  for (int tries = 0; tries < 1000; ++tries) {
    int port = 20000 + int(rng() % 12000);
    if (given.count(port)) continue;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(uint16_t(port));
    bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (ok) {
      given.insert(port);
      return port;
    }
  }
  return 0;
}

HttpResponse http_request(const std::string& host, int port, const std::string& method,
                          const std::string& target, const std::string& body,
                          const std::map<std::string, std::string>& headers,
                          std::chrono::milliseconds timeout, const std::string& tls_ca) {
  HttpResponse r;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    close(fd);
    r.error = "bad host " + host;
    return r;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    r.error = std::string("connect: ") + std::strerror(errno);
    close(fd);
    return r;
  }
  timeval tv{int(timeout.count() / 1000), int((timeout.count() % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(nullptr, SSL_CTX_free);
  std::unique_ptr<SSL, void (*)(SSL*)> ssl(nullptr, SSL_free);
  if (!tls_ca.empty()) {
    ctx.reset(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_load_verify_locations(ctx.get(), tls_ca.c_str(), nullptr) != 1) {
      r.error = "cannot load CA " + tls_ca;
      close(fd);
      return r;
    }
    ssl.reset(SSL_new(ctx.get()));
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), host.c_str());
    SSL_set_fd(ssl.get(), fd);
    if (SSL_connect(ssl.get()) != 1) {
      char b[256];
      ERR_error_string_n(ERR_get_error(), b, sizeof b);
      r.error = std::string("TLS handshake failed: ") + b;
      close(fd);
      return r;
    }
  }
  std::string req = method + " " + target + " HTTP/1.1\r\n";
  if (!headers.count("Host")) req += "Host: " + host + ":" + std::to_string(port) + "\r\n";
  req += "Connection: close\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  if ((!body.empty() || method == "POST") && !headers.count("Content-Length"))
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  for (size_t off = 0; off < req.size();) {
    ssize_t n = ssl ? SSL_write(ssl.get(), req.data() + off, int(req.size() - off))
                    : send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      r.error = "send failed";
      close(fd);
      return r;
    }
    off += size_t(n);
  }
  std::string raw;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[16384];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.error = "timeout";
      close(fd);
      return r;
    }
    pollfd p{fd, POLLIN, 0};
    if (!(ssl && SSL_pending(ssl.get()) > 0) && poll(&p, 1, int(left.count())) <= 0) continue;
    ssize_t n = ssl ? SSL_read(ssl.get(), buf, int(sizeof buf)) : recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, size_t(n));
  }
  close(fd);
  size_t hend = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || hend == std::string::npos) {
    r.error = "not an HTTP response: " + raw.substr(0, 80);
    return r;
  }
  size_t eol = raw.find("\r\n");
  r.status = std::atoi(raw.c_str() + 9);
  for (size_t pos = eol + 2; pos < hend;) {
    size_t e = raw.find("\r\n", pos);
    std::string line = raw.substr(pos, e - pos);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      size_t v = line.find_first_not_of(' ', colon + 1);
      r.headers[lower(line.substr(0, colon))] = v == std::string::npos ? "" : line.substr(v);
    }
    pos = e + 2;
  }
  std::string payload = raw.substr(hend + 4);
  if (lower(r.headers["transfer-encoding"]) == "chunked") {
    if (!dechunk(payload, &r.body)) {
      r.status = 0;
      r.error = "bad chunked body";
    }
  } else {
    r.body = std::move(payload);
  }
  return r;
}

}  // namespace ingero::test

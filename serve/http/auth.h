// Who may call a route. An Authenticator decides from the request's headers alone: the server
// calls it after the request head is read and before one byte of the body is read, and a
// refused request gets 401 with the authenticator's challenge and a closed connection.
//
// Built in: bearer tokens (MCP, the dashboard) and basic auth against bcrypt hashes (the
// Prometheus web-config `basic_auth_users`). An application may add its own (a session
// cookie, say) by implementing the interface.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hal/result.h"
#include "serve/http/message.h"

namespace ingero::serve::http {

struct AuthDecision {
  bool ok = false;
  std::string principal;  // becomes Request::principal: who the client is
};

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // Decides on `head` (method, target, headers, peer; `body` is empty). Thread-safe.
  virtual AuthDecision check(const Request& head) const = 0;
  // False when check() may take long for this head (bcrypt: ~50-250 ms): the server then
  // runs it on its slow-check thread (ServerOptions::max_queued_slow_auth) instead of the I/O
  // thread.
  virtual bool quick(const Request& head) const {
    (void)head;
    return true;
  }
  // The WWW-Authenticate value sent with 401 ("Bearer realm=\"ingero\"").
  virtual std::string challenge() const = 0;
  // The 401's body: what the client must send.
  virtual std::string refusal() const { return "authentication required"; }
};

// `Authorization: Bearer <token>`, compared in constant time against each token. The
// principal is the matching token's name.
struct BearerToken {
  std::string name;  // "default", "ci", ...
  std::string token;
};
class BearerAuth : public Authenticator {
 public:
  // An empty list, or a token that is empty or holds spaces or control characters (it could
  // never arrive intact in a header), is an Error.
  static Result<std::shared_ptr<BearerAuth>> create(std::vector<BearerToken> tokens,
                                                    std::string realm = "ingero");
  AuthDecision check(const Request& head) const override;
  std::string challenge() const override;
  std::string refusal() const override {
    return "a bearer token is required (Authorization: Bearer TOKEN)";
  }

 private:
  BearerAuth(std::vector<BearerToken> t, std::string realm)
      : tokens_(std::move(t)), realm_(std::move(realm)) {}
  std::vector<BearerToken> tokens_;
  std::string realm_;
};

// `Authorization: Basic base64(user:password)` checked against bcrypt hashes ($2a$, $2b$,
// $2y$, as htpasswd -B and Python's bcrypt write them) with libxcrypt's crypt_r. An unknown
// user costs the same bcrypt as a known one. Verified credentials are remembered by a SHA-256
// of "user:password" (never the password itself), so only the first request of a client
// pays for bcrypt; at most 1,024 are remembered.
class BasicAuth : public Authenticator {
 public:
  // `users`: name -> bcrypt hash. A hash that crypt_r does not accept as bcrypt is an Error
  // naming the user.
  static Result<std::shared_ptr<BasicAuth>> create(std::map<std::string, std::string> users,
                                                   std::string realm = "ingero");
  AuthDecision check(const Request& head) const override;
  bool quick(const Request& head) const override;
  std::string challenge() const override;

 private:
  BasicAuth(std::map<std::string, std::string> u, std::string realm, std::string dummy)
      : users_(std::move(u)), realm_(std::move(realm)), dummy_(std::move(dummy)) {}
  // The (user, password) in an Authorization header, if it is well-formed Basic.
  static bool parse(const Request& head, std::string& user, std::string& password);
  std::string cache_key(const std::string& user, const std::string& password) const;

  std::map<std::string, std::string> users_;
  std::string realm_;
  std::string dummy_;  // what an unknown user is checked against: a hash at the users' cost
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, bool> verified_;  // cache_key -> password matched
};

// The bcrypt costs a web config may give: 4 is bcrypt's least; past 16 a check takes seconds,
// which any client, without a login, could make the server spend.
inline constexpr int kMinBcryptCost = 4, kMaxBcryptCost = 16;

// Verifies `password` against a bcrypt `hash` with crypt_r (constant-time comparison).
bool bcrypt_verify(std::string_view password, const std::string& hash);
// True when crypt_r accepts `hash` as a bcrypt hash.
bool bcrypt_hash_valid(const std::string& hash);

// Constant-time equality (OpenSSL CRYPTO_memcmp); differing lengths compare unequal.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace ingero::serve::http

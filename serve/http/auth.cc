#include "serve/http/auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ingero::serve::http {

namespace {

// The credentials of "Authorization: <scheme> <rest>", or "" when the scheme differs.
std::string_view credentials(const std::string& auth, std::string_view scheme) {
  if (auth.size() <= scheme.size() || auth[scheme.size()] != ' ') return {};
  if (!iequals(std::string_view(auth).substr(0, scheme.size()), scheme)) return {};
  std::string_view rest = std::string_view(auth).substr(scheme.size() + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  return rest;
}

// Visible ASCII only: a browser sends nothing else in a header (fetch() refuses a token of
// "пароль€", and the dashboard's page blamed the server).
bool printable_token(std::string_view t) {
  if (t.empty()) return false;
  for (unsigned char c : t)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}

// A real bcrypt hash of a fixed password at `cost`: unknown users are checked against one at
// the users' cost so that they cost what a known user costs (at a fixed cost 10, users of cost
// 13 and 5 told unknown names apart by time).
std::string dummy_hash(int cost) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (!crypt_gensalt_rn("$2b$", cost, nullptr, 0, salt, sizeof salt)) return std::string();
  auto data = std::make_unique<crypt_data>();
  const char* r = crypt_r("ingero-unknown-user", salt, data.get());
  return std::string(r && r[0] != '*' ? r : "");
}

// A bcrypt hash's cost ("$2b$10$...").
int bcrypt_cost(const std::string& hash) { return std::atoi(hash.substr(4, 2).c_str()); }

}  // namespace

bool constant_time_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool bcrypt_hash_valid(const std::string& hash) {
  if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2' || hash[3] != '$') return false;
  if (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') return false;
  return crypt_checksalt(hash.c_str()) == CRYPT_SALT_OK;
}

bool bcrypt_verify(std::string_view password, const std::string& hash) {
  if (!bcrypt_hash_valid(hash)) return false;
  // crypt_r reads up to a NUL: "pw\0junk" passed as "pw" (Go's bcrypt, Prometheus's, refuses it).
  if (password.find('\0') != std::string_view::npos) return false;
  // crypt_data is 32 KiB: not on a worker's stack.
  auto data = std::make_unique<crypt_data>();
  std::string pw(password);
  const char* r = crypt_r(pw.c_str(), hash.c_str(), data.get());
  OPENSSL_cleanse(pw.data(), pw.size());
  bool ok = r && r[0] != '*' && constant_time_equal(r, hash);
  OPENSSL_cleanse(data.get(), sizeof(crypt_data));
  return ok;
}

Result<std::shared_ptr<BearerAuth>> BearerAuth::create(std::vector<BearerToken> tokens,
                                                       std::string realm) {
  if (tokens.empty()) return make_error("bearer auth: no token given");
  for (const auto& t : tokens)
    if (!printable_token(t.token))
      return make_error("bearer auth: token '" + t.name +
                        "' is empty or holds spaces, control characters or bytes beyond ASCII "
                        "(a browser sends only visible ASCII in a header)");
  return std::shared_ptr<BearerAuth>(new BearerAuth(std::move(tokens), std::move(realm)));
}

AuthDecision BearerAuth::check(const Request& head) const {
  // Several Authorization fields are refused rather than guessed at.
  if (head.headers.count("authorization") != 1) return {};
  const std::string auth = head.headers.value("authorization");
  std::string_view given = credentials(auth, "Bearer");
  if (given.empty()) return {};
  AuthDecision d;
  for (const auto& t : tokens_)  // every token is compared: the time says nothing of which
    if (constant_time_equal(given, t.token) && !d.ok) d = {true, t.name};
  return d;
}

std::string BearerAuth::challenge() const { return "Bearer realm=\"" + realm_ + "\""; }

Result<std::shared_ptr<BasicAuth>> BasicAuth::create(std::map<std::string, std::string> users,
                                                     std::string realm) {
  if (users.empty()) return make_error("basic auth: no user given");
  std::map<int, size_t> costs;
  for (const auto& [user, hash] : users) {
    if (user.empty() || user.find(':') != std::string::npos)
      return make_error("basic auth: user name '" + user + "' is empty or holds ':'");
    if (!bcrypt_hash_valid(hash))
      return make_error("basic auth: the password hash of user '" + user +
                        "' is not a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters; make one "
                        "with htpasswd -nBC 10 \"\" | tr -d ':\\n')");
    // Below 4 no login ever matched; at 31 one check by anyone (no login needed) held the
    // checking thread for days.
    int cost = bcrypt_cost(hash);
    if (cost < kMinBcryptCost || cost > kMaxBcryptCost)
      return make_error("basic auth: the password hash of user '" + user + "' has cost " +
                        std::to_string(cost) + ": give " + std::to_string(kMinBcryptCost) + " to " +
                        std::to_string(kMaxBcryptCost) +
                        " (each step doubles the time of a check; 10 takes ~50 ms)");
    ++costs[cost];
  }
  // The users' most common cost.
  int common = std::max_element(costs.begin(), costs.end(), [](auto& a, auto& b) {
                 return a.second < b.second;
               })->first;
  std::string dummy = dummy_hash(common);
  if (dummy.empty()) return make_error("basic auth: crypt_r cannot make bcrypt hashes");
  return std::shared_ptr<BasicAuth>(
      new BasicAuth(std::move(users), std::move(realm), std::move(dummy)));
}

bool BasicAuth::parse(const Request& head, std::string& user, std::string& password) {
  if (head.headers.count("authorization") != 1) return false;
  const std::string auth = head.headers.value("authorization");
  std::string_view b64 = credentials(auth, "Basic");
  if (b64.empty() || b64.size() % 4 != 0 || b64.size() > 4096) return false;
  std::string out(b64.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(b64.data()), int(b64.size()));
  if (n < 0) return false;
  size_t len = size_t(n);
  // EVP_DecodeBlock counts padding as zero bytes.
  for (size_t i = b64.size(); i > 0 && b64[i - 1] == '='; --i) --len;
  out.resize(len);
  size_t colon = out.find(':');
  if (colon == std::string::npos) return false;
  user = out.substr(0, colon);
  password = out.substr(colon + 1);
  OPENSSL_cleanse(out.data(), out.size());
  return true;
}

std::string BasicAuth::cache_key(const std::string& user, const std::string& password) const {
  std::string material = user + '\0' + password;
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(material.data()), material.size(), md);
  OPENSSL_cleanse(material.data(), material.size());
  return std::string(reinterpret_cast<char*>(md), sizeof md);
}

bool BasicAuth::quick(const Request& head) const {
  std::string user, password;
  if (!parse(head, user, password)) return true;  // refused at once
  std::string key = cache_key(user, password);
  OPENSSL_cleanse(password.data(), password.size());
  std::lock_guard<std::mutex> g(mu_);
  return verified_.count(key) > 0;
}

AuthDecision BasicAuth::check(const Request& head) const {
  std::string user, password;
  if (!parse(head, user, password)) return {};
  std::string key = cache_key(user, password);
  std::optional<bool> known;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (auto it = verified_.find(key); it != verified_.end()) known = it->second;
  }
  bool ok;
  if (known) {
    ok = *known;
  } else {
    auto it = users_.find(user);
    ok = bcrypt_verify(password, it == users_.end() ? dummy_ : it->second) && it != users_.end();
    std::lock_guard<std::mutex> g(mu_);
    if (verified_.size() >= 1024) verified_.clear();
    verified_[key] = ok;
  }
  OPENSSL_cleanse(password.data(), password.size());
  if (!ok) return {};
  return {true, user};
}

std::string BasicAuth::challenge() const {
  return "Basic realm=\"" + realm_ + "\", charset=\"UTF-8\"";
}

}  // namespace ingero::serve::http

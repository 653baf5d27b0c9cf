// The MCP sessions of the HTTP transport, owned by the clients that created them.
//
// A session is created only by an `initialize` that passed authentication (serve/http checks
// the bearer token before the handler runs), and it belongs to that client: the
// authenticated principal (the token's name), or the peer's IP address when the server has
// no token. A session id presented by another client is unknown to it.
//
// Bounds: at most `max_per_client` sessions per client and `max_sessions` in all. A client
// over its own bound loses its least-recently-used session; when the store is full, the
// least-recently-used session of the client holding the most sessions goes. So a client that
// opens sessions in a loop evicts only its own, never another client's session in use.
// Sessions unused for `idle_expiry` are dropped.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "serve/mcp/server.h"

namespace ingero::serve::mcp {

struct SessionLimits {
  size_t max_sessions = 1024;
  size_t max_per_client = 64;
  std::chrono::seconds idle_expiry{3600};
};

class SessionStore {
 public:
  explicit SessionStore(SessionLimits limits = {});

  // A new session with a fresh random id (128 bits, hex) owned by `client`, evicting as the
  // class comment says.
  std::shared_ptr<Session> create(const std::string& client);
  // The session when `id` exists and belongs to `client`; marks it used. Null otherwise.
  std::shared_ptr<Session> find(const std::string& id, const std::string& client);
  // Ends the session when it exists and belongs to `client`.
  bool erase(const std::string& id, const std::string& client);

  size_t size() const;
  size_t count(const std::string& client) const;
  uint64_t evicted() const;  // sessions pushed out by the bounds (not expiry, not erase)
  // Every request in flight in every session is cancelled (the server is stopping).
  void cancel_all();

 private:
  struct Entry {
    std::shared_ptr<Session> session;
    std::string client;
    std::list<std::string>::iterator lru;  // in the client's list
    std::chrono::steady_clock::time_point used;
  };
  void drop(const std::string& id);  // mu_ held
  void expire(std::chrono::steady_clock::time_point now);

  SessionLimits limits_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> sessions_;
  std::map<std::string, std::list<std::string>> by_client_;  // most recently used first
  uint64_t evicted_ = 0;
};

// 128 random bits as 32 hex digits (OpenSSL RAND_bytes).
std::string new_session_id();

}  // namespace ingero::serve::mcp

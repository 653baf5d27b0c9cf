#include "serve/mcp/session_store.h"

#include <openssl/rand.h>

#include <stdexcept>

namespace ingero::serve::mcp {

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

SessionStore::SessionStore(SessionLimits limits) : limits_(limits) {
  if (limits_.max_sessions == 0) limits_.max_sessions = 1;
  if (limits_.max_per_client == 0) limits_.max_per_client = 1;
}

void SessionStore::drop(const std::string& id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  auto c = by_client_.find(it->second.client);
  c->second.erase(it->second.lru);
  if (c->second.empty()) by_client_.erase(c);
  sessions_.erase(it);
}

void SessionStore::expire(std::chrono::steady_clock::time_point now) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto next = std::next(it);
    if (now - it->second.used > limits_.idle_expiry) drop(it->first);
    it = next;
  }
}

std::shared_ptr<Session> SessionStore::create(const std::string& client) {
  auto s = std::make_shared<Session>();
  s->id = new_session_id();
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> g(mu_);
  expire(now);
  if (auto c = by_client_.find(client);
      c != by_client_.end() && c->second.size() >= limits_.max_per_client) {
    drop(c->second.back());
    ++evicted_;
  }
  if (sessions_.size() >= limits_.max_sessions) {
    auto greediest = by_client_.begin();
    for (auto c = by_client_.begin(); c != by_client_.end(); ++c)
      if (c->second.size() > greediest->second.size()) greediest = c;
    drop(greediest->second.back());
    ++evicted_;
  }
  auto& list = by_client_[client];
  list.push_front(s->id);
  sessions_[s->id] = Entry{s, client, list.begin(), now};
  return s;
}

std::shared_ptr<Session> SessionStore::find(const std::string& id, const std::string& client) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.client != client) return nullptr;
  auto& list = by_client_[client];
  list.splice(list.begin(), list, it->second.lru);
  it->second.used = std::chrono::steady_clock::now();
  return it->second.session;
}

bool SessionStore::erase(const std::string& id, const std::string& client) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.client != client) return false;
  drop(id);
  return true;
}

size_t SessionStore::size() const {
  std::lock_guard<std::mutex> g(mu_);
  return sessions_.size();
}

size_t SessionStore::count(const std::string& client) const {
  std::lock_guard<std::mutex> g(mu_);
  auto c = by_client_.find(client);
  return c == by_client_.end() ? 0 : c->second.size();
}

uint64_t SessionStore::evicted() const {
  std::lock_guard<std::mutex> g(mu_);
  return evicted_;
}

void SessionStore::cancel_all() {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& [id, e] : sessions_) e.session->cancel_all();
}

}  // namespace ingero::serve::mcp

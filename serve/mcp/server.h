// The MCP server's protocol core, independent of the transport: JSON-RPC 2.0 messages in,
// responses and notifications out, per the MCP specification revisions 2025-06-18 and
// 2025-11-25 (docs/mcp.md). stdio (serve/mcp/stdio.cc) and Streamable HTTP (serve/mcp/http.cc)
// only move bytes; every protocol rule lives here, so both transports behave the same.
//
// Thread safety: handle() may run concurrently for different requests of the same or of
// different sessions; tools share nothing but the read-only trace file.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/mcp/tools.h"

namespace ingero::serve::mcp {

using Json = nlohmann::json;

// JSON-RPC 2.0 and MCP error codes.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
inline constexpr int kResourceNotFound = -32002;

inline constexpr const char* kLatestVersion = "2025-11-25";
const std::vector<std::string>& supported_versions();  // newest first

// Log levels of logging/setLevel (RFC 5424 order, debug = 0).
std::optional<int> log_level_from_name(std::string_view name);
const char* log_level_name(int level);

// One client connection's protocol state.
struct Session {
  std::string id;  // HTTP: the MCP-Session-Id; stdio: "stdio"
  std::string version;
  std::atomic<bool> initialized{false};  // initialize answered
  std::atomic<int> log_level{4};         // warning and above until logging/setLevel
  Json client_info;
  // In-flight requests that notifications/cancelled can abort.
  std::mutex mu;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> in_flight;
  // Request `id`'s cancel flag, made (and tracked) on first ask: a transport that queues the
  // request asks when it queues it, so that a cancel reaches it while it waits.
  std::shared_ptr<std::atomic<bool>> track(const Json& id);
  void untrack(const Json& id);
  // notifications/cancelled of `id`: its flag is set; one not tracked yet (over HTTP, a call
  // still waiting for a worker) is remembered, and starts cancelled when it is tracked. The
  // last kMaxCancelledAhead are kept: ids are never reused within a session.
  void cancel(const Json& id);
  static constexpr size_t kMaxCancelledAhead = 256;
  // Every request tracked is cancelled, and every one tracked from now on (the server is
  // stopping).
  void cancel_all();
  bool stopping = false;                    // under mu
  std::deque<std::string> cancelled_ahead;  // under mu
};

// Where a request's notifications go (stdio: straight out; HTTP: into the SSE response).
using Notify = std::function<void(const Json&)>;

// Limits on what a single message may be.
inline constexpr size_t kMaxMessageBytes = 4u << 20;
inline constexpr int kMaxJsonDepth = 64;

class Server {
 public:
  explicit Server(ToolContext& ctx);

  // One message from the client, raw. Returns the response for requests (and for messages
  // that are not valid JSON-RPC: an error with id null); nothing for notifications and for
  // responses. Never throws.
  std::optional<Json> handle(std::string_view raw, Session& s, const Notify& notify);
  // The same, for an already-parsed message.
  std::optional<Json> handle_message(const Json& msg, Session& s, const Notify& notify);

  // What the HTTP transport needs to know before it runs a message.
  static bool is_initialize(const Json& msg);
  static bool is_request(const Json& msg);

  const std::vector<Tool>& tools() const { return tools_; }

 private:
  Json dispatch(const std::string& method, const Json& params, const Json& id, Session& s,
                const Notify& notify);
  Json initialize(const Json& params, Session& s);
  Json call_tool(const Json& params, const Json& id, Session& s, const Notify& notify);
  Json get_prompt(const Json& params);
  Json read_resource(const Json& params);

  ToolContext& ctx_;
  std::vector<Tool> tools_;
};

// An error thrown inside dispatch and turned into a JSON-RPC error response.
struct RpcError {
  int code;
  std::string message;
  Json data = nullptr;
};

// Nesting depth of a JSON text (brackets outside strings); a cheap guard run before parsing.
int json_depth(std::string_view text);

// A JSON-RPC message as JSON (discarded where it is none). A lone UTF-16 surrogate escape, which
// RFC 8259's grammar allows and JavaScript's JSON.stringify writes for a string cut inside an
// emoji, reads as U+FFFD: the parser refused the whole message, and the answer (id null) left
// the client waiting for its request's until its timeout.
Json parse_message(std::string_view raw);
// `text` with each lone surrogate escape replaced by \ufffd (pairs and other text as they are).
std::string mend_lone_surrogates(std::string_view text);

}  // namespace ingero::serve::mcp

// Streamable HTTP transport (MCP 2025-06-18 / 2025-11-25): one endpoint, /mcp, as routes on
// the shared server library (serve/http), which does the I/O event-driven, with keep-alive,
// a whole-request deadline, per-peer and total connection caps, and the Host/Origin checks
// and the bearer token decided on the request head, before one byte of the body is read.
//   POST    a JSON-RPC message. Requests get application/json, or text/event-stream when the
//           request produced notifications (log messages) and the client accepts SSE, or
//           when the client accepts SSE alone.
//           Notifications and responses get 202.
//   DELETE  ends the session named by MCP-Session-Id.
//   GET     405 (from serve/http, with Allow): this server sends nothing unprompted.
// A ping and a notification are answered on the I/O thread, never behind queued tool calls.
// What is left to this file: content type and Accept, the message's size and depth, sessions
// (session_store.h) and the MCP-Protocol-Version header.
#include <thread>

#include "serve/http/auth.h"
#include "serve/mcp/transport.h"

namespace ingero::serve::mcp {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

http::Response plain(int status, const std::string& text) {
  return http::Response::text(status, text + "\n");
}

http::Response rpc_error(int status, int code, const std::string& msg) {
  return http::Response::json(
      status,
      Json{{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", code}, {"message", msg}}}}
          .dump());
}

// Who owns a session: the authenticated principal, or the peer's address without a token.
std::string client_of(const http::Request& rq) {
  return rq.principal.empty() ? "peer " + rq.peer : "token " + rq.principal;
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// What the client's Accept header takes: no header takes anything.
struct Accepts {
  bool json = true, sse = false;
  bool sse_only() const { return sse && !json; }
};

Accepts accepts(const http::Request& rq) {
  const std::string a = lower(rq.headers.value("Accept"));
  if (a.empty()) return {};
  bool any = a.find("*/*") != std::string::npos;
  return {any || a.find("application/json") != std::string::npos,
          a.find("text/event-stream") != std::string::npos};
}

// A ping, or a notification (a cancellation, `initialized`): answered at once on the I/O
// thread. Behind tool calls that held every worker, a client's ping went unanswered and its
// cancellation reached the call it cancelled only once a worker was free.
bool answered_at_once(const http::Request& rq) {
  if (rq.body.size() > 4096) return false;
  Json msg = parse_message(rq.body);
  if (!msg.is_object() || !msg.contains("method") || !msg["method"].is_string()) return false;
  const std::string& method = msg["method"].get_ref<const std::string&>();
  if (method == "ping") return true;
  return !msg.contains("id") && method.rfind("notifications/", 0) == 0;
}

}  // namespace

struct HttpServer::Impl {
  Server& server;
  HttpOptions opts;
  SessionStore sessions;
  std::unique_ptr<http::Server> http;

  Impl(Server& s, HttpOptions o) : server(s), opts(std::move(o)), sessions(opts.sessions) {}

  http::Response del(const http::Request& rq) {
    std::string sid = rq.headers.value("MCP-Session-Id");
    if (sid.empty()) return plain(400, "missing MCP-Session-Id");
    if (!sessions.erase(sid, client_of(rq))) return plain(404, "unknown session");
    return plain(200, "session ended");
  }

  // Checks before the message is parsed: content type, Accept, size, depth.
  std::optional<http::Response> refuse(const http::Request& rq) {
    // The media type itself, before any parameter (charset): application/jsonx or
    // application/json-seq began with the right letters and were taken for JSON.
    std::string ct = lower(rq.headers.value("Content-Type"));
    ct = ct.substr(0, ct.find(';'));
    while (!ct.empty() && (ct.back() == ' ' || ct.back() == '\t')) ct.pop_back();
    if (ct != "application/json") return plain(415, "Content-Type must be application/json");
    if (Accepts a = accepts(rq); !a.json && !a.sse)
      return plain(406, "Accept must include application/json or text/event-stream");
    if (rq.body.size() > kMaxMessageBytes || json_depth(rq.body) > kMaxJsonDepth)
      return rpc_error(400, kInvalidRequest, "message too large or nested too deeply");
    return std::nullopt;
  }

  http::Response post(const http::Request& rq) {
    if (auto r = refuse(rq)) return *r;
    // A client that accepts the stream alone is answered in it: it was sent JSON it had said
    // it would not take.
    const Accepts accept = accepts(rq);
    Json msg = parse_message(rq.body);
    if (msg.is_discarded()) return rpc_error(400, kParseError, "Parse error: not valid JSON");
    const std::string client = client_of(rq);
    std::shared_ptr<Session> session;
    bool fresh = false;
    if (Server::is_initialize(msg)) {
      session = sessions.create(client);
      fresh = true;
    } else {
      std::string sid = rq.headers.value("MCP-Session-Id");
      if (sid.empty())
        return rpc_error(400, kInvalidRequest, "Bad Request: missing MCP-Session-Id header");
      session = sessions.find(sid, client);
      if (!session) return rpc_error(404, kInvalidRequest, "Session not found: initialize again");
      std::string pv = rq.headers.value("MCP-Protocol-Version");
      const auto& sv = supported_versions();
      if (!pv.empty() && std::find(sv.begin(), sv.end(), pv) == sv.end())
        return rpc_error(400, kInvalidRequest, "Unsupported MCP-Protocol-Version: " + pv);
    }
    // A client that left (it closed its connection while its request waited or ran) is answered
    // by no one: its tool's SQL is cancelled, as by notifications/cancelled. Before, 40 such
    // requests ran their queries to the end, 33 s of CPU, and held a live client's for 50 s.
    std::shared_ptr<std::atomic<bool>> cancel;
    if (rq.client && msg.is_object() && msg.contains("id") && msg.contains("method")) {
      cancel = session->track(msg["id"]);
      rq.client->on_gone([cancel] { cancel->store(true); });
    }
    struct Untrack {
      Session& s;
      const Json& msg;
      bool on;
      ~Untrack() {
        if (on) s.untrack(msg["id"]);
      }
    } untrack{*session, msg, cancel != nullptr};
    if (cancel && cancel->load())
      return plain(503, "cancelled before it ran: its client left, or cancelled it");
    std::vector<Json> notes;
    std::mutex notes_mu;
    Notify notify = [&](const Json& n) {
      std::lock_guard<std::mutex> g(notes_mu);
      if (notes.size() < 100) notes.push_back(n);
    };
    auto out = server.handle_message(msg, *session, notify);
    if (fresh && (!out || out->contains("error"))) {
      sessions.erase(session->id, client);
      fresh = false;
    }
    http::Response r;
    if (fresh) r.headers.set("MCP-Session-Id", session->id);
    if (!out) {
      r.status = 202;
      return r;
    }
    if (accept.sse && (!notes.empty() || accept.sse_only())) {
      r.headers.set("Content-Type", "text/event-stream");
      for (const auto& n : notes) r.body += http::sse_event(dump(n), "message");
      r.body += http::sse_event(dump(*out), "message");
    } else {
      r.headers.set("Content-Type", "application/json");
      r.body = dump(*out);
    }
    return r;
  }
};

HttpServer::HttpServer(Server& server, HttpOptions opts)
    : impl_(std::make_unique<Impl>(server, std::move(opts))) {}
HttpServer::~HttpServer() {
  if (impl_->http) impl_->http->stop();
}

ingero::Status HttpServer::start() {
  auto& o = impl_->opts;
  if (o.tls_cert.empty() != o.tls_key.empty())
    return ingero::make_error("--tls-cert and --tls-key go together");
  http::ServerOptions so;
  so.listen = o.addr;
  if (!o.tls_cert.empty()) {
    http::TlsOptions tls;
    tls.cert_file = o.tls_cert;
    tls.key_file = o.tls_key;
    so.tls = tls;
  }
  so.hosts.allow_hosts = o.allow_hosts;
  so.hosts.allow_origins = o.allow_origins;
  so.workers = o.threads;
  so.max_queued = o.max_queued;
  so.limits = o.limits;
  if (!o.token.empty()) {
    auto auth = http::BearerAuth::create({{"default", o.token}});
    if (!auth) return ingero::make_error("the bearer token: " + auth.error().message);
    so.auth = *auth;
  }
  impl_->http = std::make_unique<http::Server>(std::move(so));
  http::RouteOptions post;
  post.max_body_bytes = kMaxMessageBytes;
  post.io_thread_if = answered_at_once;
  impl_->http->route(
      "POST", "/mcp", [this](const http::Request& rq) { return impl_->post(rq); }, post);
  http::RouteOptions del;
  del.run_on = http::RunOn::io_thread;  // a map lookup under a lock
  impl_->http->route(
      "DELETE", "/mcp", [this](const http::Request& rq) { return impl_->del(rq); }, del);
  if (auto st = impl_->http->start(); !st) return st;
  url_ = impl_->http->url("/mcp");
  return {};
}

int HttpServer::port() const { return impl_->http ? impl_->http->port() : 0; }
bool HttpServer::loopback_only() const { return impl_->http && impl_->http->loopback_only(); }
http::Stats HttpServer::stats() const { return impl_->http ? impl_->http->stats() : http::Stats{}; }
const SessionStore& HttpServer::sessions() const { return impl_->sessions; }

int HttpServer::run(std::atomic<bool>& stop) {
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // What runs stops as its tool allows (run_sql within milliseconds); what waits is dropped.
  impl_->sessions.cancel_all();
  if (impl_->http) impl_->http->stop();
  return 0;
}

}  // namespace ingero::serve::mcp

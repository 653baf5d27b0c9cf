#include "tests/support/otlp_receiver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "compress/gzip.h"
#include "serve/http/server.h"

namespace ingero::test {

struct OtlpReceiver::Got {
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  OtlpReceiverOptions options;
  size_t requests = 0, undecodable = 0;
  bool partial_given = false;
  std::vector<otlp_col::metrics::v1::ExportMetricsServiceRequest> metrics;
  std::vector<otlp_col::logs::v1::ExportLogsServiceRequest> logs;
  std::vector<otlp_col::trace::v1::ExportTraceServiceRequest> traces;
  std::vector<std::string> raw_metrics;
  std::vector<serve::http::Headers> headers;
  std::vector<std::chrono::steady_clock::time_point> arrivals;
};

OtlpReceiver::OtlpReceiver(OtlpReceiverOptions o) : got_(std::make_unique<Got>()) {
  got_->options = std::move(o);
  serve::http::ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.hosts.check_host = false;
  so.log = [](const std::string&) {};
  if (!got_->options.tls_cert.empty()) {
    serve::http::TlsOptions tls;
    tls.cert_file = got_->options.tls_cert;
    tls.key_file = got_->options.tls_key;
    so.tls = tls;
  }
  server_ = std::make_unique<serve::http::Server>(std::move(so));
  for (const char* path : {"/v1/metrics", "/v1/logs", "/v1/traces"}) {
    std::string p = path;
    server_->route("POST", p, [this, p](const serve::http::Request& req) {
      Got& g = *got_;
      std::unique_lock<std::mutex> lk(g.mu);
      size_t index = g.requests++;
      g.headers.push_back(req.headers);
      g.arrivals.push_back(std::chrono::steady_clock::now());
      serve::http::Response r;
      r.headers.set("Content-Type", "application/x-protobuf");
      if (index < g.options.statuses.size() && g.options.statuses[index] / 100 != 2) {
        r.status = g.options.statuses[index];
        if (g.options.retry_after && (r.status == 429 || r.status == 503))
          r.headers.set("Retry-After", std::to_string(*g.options.retry_after));
        g.cv.notify_all();
        return r;
      }
      std::string body = req.body;
      if (serve::http::iequals(req.headers.value("Content-Encoding"), "gzip")) {
        auto z = compress::gunzip(body);
        body = z ? *z : std::string("\xff\xff\xff", 3);
      }
      bool ok = false;
      int64_t reject = g.partial_given ? 0 : g.options.partial_reject;
      if (p == "/v1/metrics") {
        otlp_col::metrics::v1::ExportMetricsServiceRequest m;
        if ((ok = m.ParseFromString(body))) {
          g.metrics.push_back(m);
          g.raw_metrics.push_back(body);
        }
        otlp_col::metrics::v1::ExportMetricsServiceResponse a;
        if (reject) a.mutable_partial_success()->set_rejected_data_points(reject);
        r.body = a.SerializeAsString();
      } else if (p == "/v1/logs") {
        otlp_col::logs::v1::ExportLogsServiceRequest m;
        if ((ok = m.ParseFromString(body))) g.logs.push_back(m);
        otlp_col::logs::v1::ExportLogsServiceResponse a;
        if (reject) a.mutable_partial_success()->set_rejected_log_records(reject);
        r.body = a.SerializeAsString();
      } else {
        otlp_col::trace::v1::ExportTraceServiceRequest m;
        if ((ok = m.ParseFromString(body))) g.traces.push_back(m);
        otlp_col::trace::v1::ExportTraceServiceResponse a;
        if (reject) a.mutable_partial_success()->set_rejected_spans(reject);
        r.body = a.SerializeAsString();
      }
      if (reject) g.partial_given = true;
      if (!ok) {
        ++g.undecodable;
        r.status = 400;
        r.body.clear();
      }
      g.cv.notify_all();
      return r;
    });
  }
  auto st = server_->start();
  if (!st) throw std::runtime_error("OTLP receiver: " + st.error().message);
}

OtlpReceiver::~OtlpReceiver() { server_->stop(std::chrono::milliseconds(200)); }

std::string OtlpReceiver::url() const { return server_->url(""); }

std::vector<otlp_col::metrics::v1::ExportMetricsServiceRequest> OtlpReceiver::metrics() const {
  std::lock_guard<std::mutex> g(got_->mu);
  return got_->metrics;
}
std::vector<otlp_col::logs::v1::ExportLogsServiceRequest> OtlpReceiver::logs() const {
  std::lock_guard<std::mutex> g(got_->mu);
  return got_->logs;
}
std::vector<otlp_col::trace::v1::ExportTraceServiceRequest> OtlpReceiver::traces() const {
  std::lock_guard<std::mutex> g(got_->mu);
  return got_->traces;
}
std::vector<std::string> OtlpReceiver::raw_metrics() const {
  std::lock_guard<std::mutex> g(got_->mu);
  return got_->raw_metrics;
}
size_t OtlpReceiver::requests() const {
  std::lock_guard<std::mutex> g(got_->mu);
  return got_->requests;
}
size_t OtlpReceiver::undecodable() const {
  std::lock_guard<std::mutex> g(got_->mu);
  return got_->undecodable;
}
std::vector<std::chrono::steady_clock::time_point> OtlpReceiver::arrivals() const {
  std::lock_guard<std::mutex> g(got_->mu);
  return got_->arrivals;
}
std::vector<std::string> OtlpReceiver::header(const std::string& name) const {
  std::lock_guard<std::mutex> g(got_->mu);
  std::vector<std::string> out;
  for (const auto& h : got_->headers) out.push_back(h.value(name));
  return out;
}

bool OtlpReceiver::wait_for(const std::function<bool()>& pred,
                            std::chrono::milliseconds timeout) const {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    std::unique_lock<std::mutex> lk(got_->mu);
    if (got_->cv.wait_until(lk, std::min(until, std::chrono::steady_clock::now() +
                                                    std::chrono::milliseconds(50))) ==
            std::cv_status::timeout &&
        std::chrono::steady_clock::now() >= until) {
      lk.unlock();
      return pred();
    }
  }
}

SilentReceiver::SilentReceiver() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd_, 64) != 0)
    throw std::runtime_error("silent receiver: cannot listen");
  socklen_t len = sizeof(a);
  getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      clients_.push_back(c);
      ++accepted_;
    }
  });
}

SilentReceiver::~SilentReceiver() {
  stop_ = true;
  thread_.join();
  for (int c : clients_) close(c);
  close(fd_);
}

}  // namespace ingero::test

// The dashboard without a browser: the model cache (one computation per file change, shared
// by concurrent requests, at most one per refresh interval, failures cached too) and the HTTP
// routes on 127.0.0.1 (page, model, ETag/304, bearer token, Host/Origin, 503 on failure).
#include "serve/report/dashboard.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "test_paths.h"
#include "tests/support/http_client.h"
#include "tests/support/trace_db.h"

namespace ingero::serve::report {
namespace {

using namespace std::chrono_literals;

void touch(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

TEST(ReportCache, ConcurrentRequestsShareOneComputation) {
  std::string path = test::temp_path("cache-a.db");
  touch(path, "one");
  std::atomic<int> computed{0};
  ReportCache cache(
      path,
      [&]() -> Result<std::string> {
        ++computed;
        std::this_thread::sleep_for(200ms);
        return std::string("{\"n\":") + std::to_string(computed.load()) + "}";
      },
      0ms);
  std::vector<std::future<ReportCache::Entry>> f;
  for (int i = 0; i < 8; ++i)
    f.push_back(std::async(std::launch::async, [&] { return cache.get(); }));
  std::set<std::string> tags;
  for (auto& x : f) {
    auto e = x.get();
    EXPECT_TRUE(e.ok);
    EXPECT_EQ(*e.body, "{\"n\":1}");
    tags.insert(e.etag);
  }
  EXPECT_EQ(computed.load(), 1);
  EXPECT_EQ(tags.size(), 1u);
  // Unchanged file: cached, however often asked.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(cache.get().generation, 1u);
  EXPECT_EQ(computed.load(), 1);
  // A changed file (size and mtime): computed again.
  touch(path, "two, longer");
  EXPECT_EQ(*cache.get().body, "{\"n\":2}");
  EXPECT_EQ(computed.load(), 2);
  EXPECT_EQ(cache.computations(), 2u);
}

// A hostile tester's finding: the ETag was a count of computations, "g1" in every process, so a
// dashboard restarted on another trace answered an open tab's "g1" with 304, and the tab kept
// the old trace. It is the body's digest: two traces' first answers differ, one body's agree.
TEST(ReportCache, TheETagIsTheBodysOwnNotACount) {
  auto first_etag = [](const std::string& name, const std::string& body) {
    std::string path = test::temp_path(name);
    touch(path, "x");
    ReportCache cache(
        path, [&]() -> Result<std::string> { return body; }, 0ms);
    return cache.get().etag;
  };
  EXPECT_NE(first_etag("etag-a.db", "{\"trace\":\"a\"}"),
            first_etag("etag-b.db", "{\"trace\":\"b\"}"));
  EXPECT_EQ(first_etag("etag-c.db", "{\"trace\":\"a\"}"),
            first_etag("etag-d.db", "{\"trace\":\"a\"}"));
}

// ingero_db_bytes is what the trace takes on disk: the file and its WAL (it read the file
// alone, 16 KiB, while 1.2 MB of frames waited in the WAL for a checkpoint).
TEST(ReportCache, ATracesBytesAreItsFileAndItsWal) {
  std::string path = test::temp_path("bytes.db");
  EXPECT_EQ(file_stamp(path).bytes(), 0u);
  touch(path, std::string(4096, 'x'));
  EXPECT_EQ(file_stamp(path).bytes(), 4096u);
  touch(path + "-wal", std::string(1000, 'w'));
  EXPECT_EQ(file_stamp(path).bytes(), 5096u);
}

TEST(ReportCache, AtMostOneComputationPerMinAgeAndFailuresAreCached) {
  std::string path = test::temp_path("cache-b.db");
  std::atomic<int> computed{0};
  ReportCache cache(
      path,
      [&]() -> Result<std::string> {
        ++computed;
        if (!std::filesystem::exists(path)) return make_error(path + ": No such file");
        return std::string("{}");
      },
      400ms);
  auto e = cache.get();
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.body->find("No such file"), std::string::npos) << *e.body;
  touch(path, "x");
  // Younger than min_age: the failure stands even though the file appeared.
  EXPECT_FALSE(cache.get().ok);
  EXPECT_EQ(computed.load(), 1);
  std::this_thread::sleep_for(450ms);
  EXPECT_TRUE(cache.get().ok);
  EXPECT_EQ(computed.load(), 2);
  // A WAL that grows counts as a change.
  std::this_thread::sleep_for(450ms);
  EXPECT_EQ(cache.get().generation, 2u);
  touch(path + "-wal", "frames");
  EXPECT_EQ(cache.get().generation, 3u);
}

class DashboardHttp : public ::testing::Test {
 protected:
  void start(std::shared_ptr<const http::Authenticator> auth = nullptr, bool fail = false) {
    path_ = test::temp_path("dash.db");
    touch(path_, "v1");
    DashboardOptions o;
    o.db_path = path_;
    o.title = path_;
    o.server.listen = "127.0.0.1:0";
    o.server.auth = std::move(auth);
    o.refresh = 0ms;
    o.compute = [this, fail]() -> Result<nlohmann::json> {
      ++computed_;
      if (fail) return make_error("x.db: file is not a database");
      return nlohmann::json{{"header", {{"calls", computed_.load()}}}};
    };
    dash_ = std::make_unique<Dashboard>(std::move(o));
    auto st = dash_->start();
    ASSERT_TRUE(st) << st.error().message;
    port_ = std::stoi(dash_->url().substr(dash_->url().rfind(':') + 1));
  }
  test::HttpResponse get(const std::string& target, std::map<std::string, std::string> h = {}) {
    return test::http_request("127.0.0.1", port_, "GET", target, "", h);
  }
  std::string path_;
  std::atomic<int> computed_{0};
  std::unique_ptr<Dashboard> dash_;
  int port_ = 0;
};

TEST_F(DashboardHttp, PageAndModelWithETag) {
  start();
  auto page = get("/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_NE(page.headers["content-security-policy"].find("frame-ancestors 'none'"),
            std::string::npos);
  EXPECT_NE(page.body.find("\"live\""), std::string::npos);
  auto r = get("/api/report");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(r.body)["header"]["calls"], 1);
  std::string etag = r.headers["etag"];
  EXPECT_EQ(etag.size(), 18u) << etag;  // the body's digest, 16 hex digits, quoted
  auto same = get("/api/report", {{"If-None-Match", etag}});
  EXPECT_EQ(same.status, 304);
  EXPECT_EQ(same.body, "");
  EXPECT_EQ(computed_.load(), 1);
  touch(path_, "v2 is longer");
  auto next = get("/api/report", {{"If-None-Match", etag}});
  EXPECT_EQ(next.status, 200);
  EXPECT_NE(next.headers["etag"], etag);
  EXPECT_EQ(get("/nope").status, 404);
  EXPECT_EQ(test::http_request("127.0.0.1", port_, "POST", "/api/report", "{}").status, 405);
}

TEST_F(DashboardHttp, TokenGuardsTheModelNotThePage) {
  auto auth = http::BearerAuth::create({{"default", "s3cret"}});
  ASSERT_TRUE(auth);
  start(*auth);
  EXPECT_EQ(get("/").status, 200);
  auto no = get("/api/report");
  EXPECT_EQ(no.status, 401);
  EXPECT_NE(no.headers["www-authenticate"].find("Bearer"), std::string::npos);
  EXPECT_EQ(get("/api/report", {{"Authorization", "Bearer nope"}}).status, 401);
  EXPECT_EQ(get("/api/report", {{"Authorization", "Bearer s3cret"}}).status, 200);
  EXPECT_EQ(computed_.load(), 1);  // refused requests never computed anything
  // DNS rebinding: a foreign Host or Origin is refused before the token is even looked at.
  EXPECT_EQ(get("/", {{"Host", "evil.example"}}).status, 403);
  EXPECT_EQ(
      get("/api/report", {{"Authorization", "Bearer s3cret"}, {"Origin", "http://evil.example"}})
          .status,
      403);
  EXPECT_EQ(get("/api/report", {{"Authorization", "Bearer s3cret"},
                                {"Origin", "http://127.0.0.1:" + std::to_string(port_)}})
                .status,
            200);
}

TEST_F(DashboardHttp, AModelThatCannotBeBuiltIs503WithTheReason) {
  start(nullptr, true);
  auto r = get("/api/report");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"], "x.db: file is not a database");
  EXPECT_FALSE(r.headers["retry-after"].empty());
}

}  // namespace
}  // namespace ingero::serve::report

// The fleet's commands first ask ClickHouse whether it answers at all (ClickHouseClient::ping).
// The client's first request already asks the user's profile, and a number back says the server
// is ClickHouse: the bare SELECT 1 after it was a second round trip at every start.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "fleet/clickhouse_client.h"
#include "fleet/clickhouse_source.h"
#include "tests/support/fake_http_server.h"

namespace ingero::test {
namespace {

fleet::Endpoint endpoint_of(const FakeHttpServer& server) {
  return fleet::Endpoint{.base = "http://127.0.0.1:" + std::to_string(server.port()),
                         .database = "ingero",
                         .user = "",
                         .password = ""};
}

// ClickHouse's answers to the three questions these tests make.
std::string clickhouse_answer(const std::string& target, const std::string& body) {
  const std::string q = target + body;
  if (q.find("system.settings") != std::string::npos) return "0\n";
  if (q.find("SELECT 1 FORMAT") != std::string::npos) return "1\n";
  if (q.find("SELECT DISTINCT node") != std::string::npos) return "node-a\nnode-b\n";
  return "";
}

TEST(ClickHouseClientPing, TheFirstPingIsTheProfilesQuestionAndALaterOneASelect) {
  FakeHttpServer ch(clickhouse_answer);
  fleet::ClickHouseClient client(endpoint_of(ch));
  ASSERT_TRUE(client.ping(5000));
  EXPECT_EQ(ch.count("system.settings"), 1u);
  EXPECT_EQ(ch.count("SELECT 1 FORMAT"), 0u);
  EXPECT_EQ(ch.targets().size(), 1u);
  // Later the profile is known: the server is asked again, for itself.
  ASSERT_TRUE(client.ping(5000));
  EXPECT_EQ(ch.count("system.settings"), 1u);
  EXPECT_EQ(ch.count("SELECT 1 FORMAT"), 1u);
}

TEST(ClickHouseClientPing, TheSourcesNodesTakeTwoRequestsNotThree) {
  FakeHttpServer ch(clickhouse_answer);
  fleet::ClickHouseTraceSource src(std::make_unique<fleet::ClickHouseClient>(endpoint_of(ch)));
  EXPECT_EQ(src.nodes(), (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(src.error(), "");
  EXPECT_EQ(ch.targets().size(), 2u);
  EXPECT_EQ(ch.count("SELECT 1 FORMAT"), 0u);
}

// Something else on the port answers 200 to anything: neither answer is ClickHouse's, and the
// error says what it said.
TEST(ClickHouseClientPing, AServerThatIsNotClickHouseIsNamed) {
  FakeHttpServer web(
      [](const std::string&, const std::string&) { return std::string("<html>It works</html>"); });
  fleet::ClickHouseClient client(endpoint_of(web));
  auto st = client.ping(5000);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("answered SELECT 1 with \"<html>It works</html>\": is it "
                                    "ClickHouse?"),
            std::string::npos)
      << st.error().message;
  EXPECT_EQ(web.count("SELECT 1 FORMAT"), 1u);
}

// A proxy that answers the profile's question with a text, not a number: SELECT 1 decides.
TEST(ClickHouseClientPing, AProfileAnswerThatIsNoNumberIsFollowedBySelectOne) {
  FakeHttpServer ch([](const std::string& target, const std::string& body) -> std::string {
    const std::string q = target + body;
    if (q.find("system.settings") != std::string::npos)
      return "Code: 497, e.displayText() = DB::Exception: reader: Not enough privileges";
    return clickhouse_answer(target, body);
  });
  fleet::ClickHouseClient client(endpoint_of(ch));
  EXPECT_TRUE(client.ping(5000));
  EXPECT_EQ(ch.count("SELECT 1 FORMAT"), 1u);
}

}  // namespace
}  // namespace ingero::test

// Links close on a thread of their own (probe/link_closer.h): closing a uprobe link waits for
// the kernel's grace periods, 30-150 ms, which the ring reader cannot spend.
#include "probe/link_closer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <vector>

namespace ingero::hal {
namespace {

bool is_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

// close() returns before the links are closed: the job here cannot finish until the caller,
// back from close(), lets it.
TEST(LinkCloser, CloseReturnsAtOnceAndThenClosesInOrderAndRunsThen) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::promise<void> caller_back;
  auto back = caller_back.get_future();
  std::vector<int> order;
  bool then_saw_closed = false, caller_was_back = false;
  LinkCloser closer;
  std::vector<Link> links;
  links.push_back(Link::from_fd(p[0]));
  links.push_back(Link::from_fd(p[1]));
  closer.close(std::move(links), [&] {
    then_saw_closed = !is_open(p[0]) && !is_open(p[1]);
    caller_was_back = back.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    order.push_back(1);
  });
  caller_back.set_value();
  closer.close({}, [&] { order.push_back(2); });
  closer.wait();
  EXPECT_TRUE(caller_was_back) << "close() waited for the links to close";
  EXPECT_TRUE(then_saw_closed);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

// Its destructor finishes every close queued.
TEST(LinkCloser, DestructionFinishesWhatWasQueued) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  int ran = 0;
  {
    LinkCloser closer;
    for (int i = 0; i < 3; ++i) {
      std::vector<Link> one;
      if (i < 2) one.push_back(Link::from_fd(p[i]));
      closer.close(std::move(one), [&ran] { ++ran; });
    }
  }
  EXPECT_EQ(ran, 3);
  EXPECT_FALSE(is_open(p[0]));
  EXPECT_FALSE(is_open(p[1]));
}

// close_links closes every link it is given, on several threads (the session's end).
TEST(LinkCloser, CloseLinksClosesEveryOne) {
  std::vector<int> fds;
  std::vector<Link> links;
  for (int i = 0; i < 20; ++i) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    for (int fd : p) {
      fds.push_back(fd);
      links.push_back(Link::from_fd(fd));
    }
  }
  close_links(std::move(links), 8);
  size_t open = 0;
  for (int fd : fds) open += is_open(fd);
  EXPECT_EQ(open, 0u);
}

}  // namespace
}  // namespace ingero::hal

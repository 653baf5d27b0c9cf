// A call record with every block at once (12 argument words, off-CPU detail, the thread's name,
// the caller's address, the largest return and entry captures) is 400 bytes. The programs' bound
// on a record, INGERO_CALL_REC_MAX, left out the caller's 8 bytes and dropped such a record
// without a word (bpf/call_emit.h: submit_call).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "bpf/ingero_records.h"
#include "kernelside/host_programs.h"
#include "probe/bpf_session.h"
#include "probe/ring_reader.h"
#include "tests/bpf/self_probe.h"
#include "tests/support/trace_db.h"

// Twelve arguments (six in registers, six on the stack); it sleeps, so the call has off-CPU
// detail, and writes 32 bytes through its first argument, read at its return.
extern "C" __attribute__((noinline, used, visibility("default"))) int ingero_test_every_block(
    uint64_t* out, const uint8_t* in, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5,
    uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3, uint64_t s4, uint64_t s5) {
  usleep(2000);
  for (int i = 0; i < 4; ++i) out[i] = in[i] + a2 + a3 + a4 + a5 + s0 + s1 + s2 + s3 + s4 + s5;
  asm volatile("" ::: "memory");
  return 0;
}

namespace ingero::test {
namespace {

TEST(CallRecordSize, ARecordWithEveryBlockIsShipped) {
  REQUIRE_BPF();
  // The scheduler's programs keep a thread's off-CPU time.
  auto session = open_small_session(/*host_context=*/true);
  ASSERT_TRUE(session) << session.error().message;
  kernelside::HostPrograms host(**session);
  for (const auto& [program, st] : host.attach()) ASSERT_TRUE(st) << program;
  // A launch (the caller's address), its first on the thread timed (the return read), every
  // register and stack word, the largest captures.
  constexpr hal::ProbeSpec kEvery{
      .symbol = "ingero_test_every_block",
      .kind = hal::EventKind::kLaunch,
      .args = {.stack_words = INGERO_STACK_WORDS,
               .entry_read = hal::read_at_reg(1, INGERO_ENTRY_READ_MAX),
               .return_read = hal::read_at_reg(0, INGERO_RETURN_READ_MAX)},
      .fields = {{hal::Field::kStream, hal::reg(5)}}};
  std::string why;
  auto links = attach_to_self(**session, kEvery, &why);
  ASSERT_FALSE(links.empty()) << why;

  std::vector<std::vector<uint8_t>> records;
  auto reader =
      hal::RingReader::create((*session)->calls_fd(), -1, -1, [&](const void* d, size_t size) {
        auto* p = static_cast<const uint8_t*>(d);
        records.emplace_back(p, p + size);
      });
  ASSERT_TRUE(reader) << reader.error().message;
  uint64_t out[4] = {};
  uint8_t in[INGERO_ENTRY_READ_MAX] = {1, 2, 3, 4};
  ASSERT_EQ(ingero_test_every_block(out, in, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), 0);
  ASSERT_TRUE((*reader)->drain());

  ASSERT_EQ(records.size(), 1u) << "the call was not shipped";
  ASSERT_EQ(records[0].size(), size_t(INGERO_CALL_REC_MAX));
  ingero_call_rec h;
  std::memcpy(&h, records[0].data(), sizeof(h));
  EXPECT_EQ(h.nregs, INGERO_REG_WORDS);
  EXPECT_EQ(h.nstack, INGERO_STACK_WORDS);
  EXPECT_EQ(h.entry_len, INGERO_ENTRY_READ_MAX);
  EXPECT_EQ(h.return_len, INGERO_RETURN_READ_MAX);
  uint16_t every = INGERO_CALL_OFFCPU | INGERO_CALL_IDENT | INGERO_CALL_CALLER;
  EXPECT_EQ(h.flags & every, every) << std::hex << h.flags;
  EXPECT_EQ(h.flags & INGERO_CALL_ENTRY_ONLY, 0) << "the first launch of a thread is timed";
}

}  // namespace
}  // namespace ingero::test

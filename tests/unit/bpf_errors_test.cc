// What ingero says when the kernel refuses its BPF programs (probe/bpf_errors.h): the program
// and the verifier's reason, from libbpf's own words, as Linux 6.18.44 gave them.
#include "probe/bpf_errors.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdarg>

namespace ingero::hal {
namespace {

// The verifier refused the call program: its last line that is not a statistic is the reason.
TEST(LoadFailure, NamesTheProgramAndTheVerifiersReason) {
  std::string out =
      "libbpf: prog 'ingero_call': BPF program load failed: Permission denied\n"
      "libbpf: prog 'ingero_call': -- BEGIN PROG LOAD LOG --\n"
      "0: R1=ctx() R10=fp0\n"
      "Func#12 ('ingero_name_at_return') is safe for any args that match its prototype\n"
      "combined stack size of 4 calls is 560. Too large\n"
      "processed 32428 insns (limit 1000000) max_states_per_insn 14 total_states 1781\n"
      "-- END PROG LOAD LOG --\n"
      "libbpf: prog 'ingero_call': failed to load: -13\n"
      "libbpf: failed to load object 'ingero_bpf'\n";
  auto f = load_failure_of(out);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->program, "ingero_call");
  EXPECT_EQ(f->reason, "combined stack size of 4 calls is 560. Too large");
}

// Refused before its verifier ran (a security policy): no reason beyond the statistics.
TEST(LoadFailure, AProgramRefusedBeforeVerificationHasNoReason) {
  std::string out =
      "libbpf: prog 'ingero_inflight': BPF program load failed: Operation not permitted\n"
      "libbpf: permission error while running as root; try raising 'ulimit -l'? current value: "
      "8.0 MiB\n"
      "libbpf: prog 'ingero_inflight': -- BEGIN PROG LOAD LOG --\n"
      "processed 0 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0\n"
      "-- END PROG LOAD LOG --\n"
      "libbpf: prog 'ingero_inflight': failed to load: -1\n";
  auto f = load_failure_of(out);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->program, "ingero_inflight");
  EXPECT_EQ(f->reason, "");
  EXPECT_FALSE(load_failure_of("libbpf: failed to open object\n"));
}

// Root, or CAP_BPF with CAP_PERFMON, may load tracing programs; CAP_BPF alone may not.
TEST(LoadFailure, PrivilegesAreSysAdminOrBpfWithPerfmon) {
  EXPECT_TRUE(can_load_tracing(0x000001fffeffffffull));  // root without CAP_SYS_RESOURCE
  EXPECT_TRUE(can_load_tracing(1ull << 21));
  EXPECT_TRUE(can_load_tracing((1ull << 38) | (1ull << 39)));
  EXPECT_FALSE(can_load_tracing(1ull << 39));
  EXPECT_FALSE(can_load_tracing(0));
}

void say(enum libbpf_print_level level, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  libbpf_print(level, fmt, args);
  va_end(args);
}

// libbpf's warnings are kept while a LoadWarnings lives: a verifier log of megabytes by its head
// and tail, where libbpf names the program and the verifier says why; its debug lines are not.
// The error then says what was refused, as root; without the privileges, to get them.
TEST(LoadFailure, WarningsAreKeptWhileACaptureLivesAndNameTheRefusal) {
  std::string text;
  {
    LoadWarnings w;
    say(LIBBPF_DEBUG, "libbpf: loading object '%s'\n", "ingero_bpf");
    say(LIBBPF_WARN, "libbpf: prog '%s': BPF program load failed: %s\n", "ingero_call",
        "Permission denied");
    std::string trace(2 << 20, 'x');
    say(LIBBPF_WARN,
        "libbpf: prog '%s': -- BEGIN PROG LOAD LOG --\n%s\ncombined stack size of 4 calls is "
        "560. Too large\nprocessed 32428 insns\n-- END PROG LOAD LOG --\n",
        "ingero_call", trace.c_str());
    text = w.text();
    EXPECT_EQ(text.find("loading object"), std::string::npos);
    EXPECT_LT(text.size(), 70u * 1024);
  }
  EXPECT_TRUE(LoadWarnings().text().empty());
  auto f = load_failure_of(text);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->program, "ingero_call");
  EXPECT_EQ(f->reason, "combined stack size of 4 calls is 560. Too large");
  auto caps = effective_caps();
  ASSERT_TRUE(caps);
  EXPECT_EQ(load_error(-EACCES, text).message,
            can_load_tracing(*caps)
                ? "loading the BPF programs: the kernel refused program ingero_call, its verifier "
                  "said: combined stack size of 4 calls is 560. Too large (Permission denied)"
                : "loading the BPF programs: Permission denied (tracing needs root, or CAP_BPF "
                  "and CAP_PERFMON; run `ingero check`)");
}

}  // namespace
}  // namespace ingero::hal

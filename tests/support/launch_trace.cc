#include "tests/support/launch_trace.h"

#include <gtest/gtest.h>

#include "store/trace_writer.h"

namespace ingero::test {

void write_launch_trace(const std::string& path, int n, const std::string& node, int64_t start_ns,
                        const std::function<void(hal::Event&, int)>& shape) {
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  (*w)->set_folding(true);  // as `ingero trace` writes: blocks folded as they close
  store::SessionInfo si;
  si.node = si.host = node;
  si.started_at_ns = start_ns;
  si.mono_offset_ns = si.started_at_ns;
  ASSERT_TRUE((*w)->begin_session(si));
  for (int i = 0; i < n; ++i) {
    hal::Event e;
    e.ts_ns = uint64_t(1'000'000 + int64_t(i) * 10'000);
    e.dur_ns = 1000 + uint64_t(i % 100) * 10;
    e.pid = e.tid = 4001;
    e.set_comm("python3");
    e.vendor = "nvidia";
    e.api = "cuda_runtime";
    e.op = "cudaLaunchKernel";
    e.kind = hal::EventKind::kLaunch;
    e.has_ret = true;
    e.set(hal::Field::kStream, 0x5a);
    if (shape) shape(e, i);
    ASSERT_TRUE((*w)->add(e));
  }
  store::SessionEnd end;
  end.stopped_at_ns = si.started_at_ns + 2'000'000'000;
  end.exit_reason = "duration";
  ASSERT_TRUE((*w)->finish(end));
}

}  // namespace ingero::test

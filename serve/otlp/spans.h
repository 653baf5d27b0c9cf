// Slow calls and collectives as OTLP spans (`--otlp-spans`): a call that took at least the
// threshold, and every collective and point-to-point call, becomes one span of its own trace
// (no parent: ingero sees calls, not requests), at most `per_second` spans per second of the
// calls' clock; the rest are counted (over_rate), never queued.
//
// A span: name = the op; kind INTERNAL; start and end from the call; status ERROR with
// "returned N" when the call returned non-zero; attributes process.pid, thread.id,
// process.executable.name (comm), ingero.{vendor, api, kind, node, bytes, return_code,
// off_cpu_ns, preemptions}, ingero.collective.{count, rank, nranks, comm_hash} where the call
// has them, code.stacktrace (the call's stack, one frame a line, innermost first, as explain
// prints frames) when the stack is known, and the process's container.id / k8s.pod.uid.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "hal/error_codes.h"
#include "hal/event.h"
#include "hal/stack_frame.h"
#include "opentelemetry/proto/trace/v1/trace.pb.h"
#include "serve/otlp/resource.h"

namespace ingero::serve::otlp {

// What a span needs of an event, copied on the tracer's thread (the event's views do not
// outlive the call).
struct SpanInput {
  int64_t start_ns = 0;  // Unix ns
  uint64_t dur_ns = 0;
  uint32_t pid = 0, tid = 0;
  std::string comm, vendor, api, kind, op;
  bool has_ret = false;
  int64_t ret = 0;
  std::string error;    // the code's name ("cudaErrorIllegalAddress"), "" when unknown
  bool failed = false;  // returned a failure: non-zero, and not "not ready" (a call in progress)
  std::optional<uint64_t> bytes, count, rank, nranks, comm_hash;
  uint64_t off_cpu_ns = 0;
  uint32_t preempts = 0;
  std::string stack;  // code.stacktrace: the call's stack as text, "" when unknown
};

class SpanFilter {
 public:
  SpanFilter(uint64_t threshold_ns, uint32_t per_second)
      : threshold_ns_(threshold_ns), per_second_(per_second) {}
  enum class Verdict { kSkip, kSpan, kOverRate };
  // Host events, calls still in flight, and fast calls that are not collectives: kSkip.
  Verdict check(const hal::Event& e);

 private:
  uint64_t threshold_ns_;
  uint32_t per_second_;
  uint64_t second_ = 0, in_second_ = 0;
};

// `codes` names a failed call's code (hal/error_codes.h); null or empty: its number only.
SpanInput span_input(const hal::Event& e, int64_t mono_to_wall_ns, const std::string* stack,
                     const hal::ErrorCodeFn* codes = nullptr);

// Stacks seen so far (EventSink::on_stack), as the text of code.stacktrace; the oldest are
// forgotten beyond `capacity`.
class StackTexts {
 public:
  explicit StackTexts(size_t capacity = 8192) : capacity_(capacity) {}
  void add(uint64_t stack_id, const std::vector<hal::StackFrame>& frames);
  const std::string* find(uint64_t stack_id) const;

 private:
  size_t capacity_;
  std::unordered_map<uint64_t, std::string> text_;
  std::deque<uint64_t> order_;
};
// One frame as explain prints it: "[Python] f.py:12 in g()", "fn at file.c:3 (lib.so+0x1a)".
std::string frame_text(const hal::StackFrame& f);

void make_span(const SpanInput& in, const ContainerIds& ids, const std::string& node,
               std::mt19937_64& rng, opentelemetry::proto::trace::v1::Span* out);

}  // namespace ingero::serve::otlp

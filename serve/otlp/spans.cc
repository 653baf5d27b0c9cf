#include "serve/otlp/spans.h"

#include <cstdio>
#include <cstring>

#include "hal/call_failure.h"
#include "serve/otlp/attributes.h"

namespace ingero::serve::otlp {

namespace pt = opentelemetry::proto::trace::v1;

SpanFilter::Verdict SpanFilter::check(const hal::Event& e) {
  if (hal::is_host_kind(e.kind) || e.unfinished) return Verdict::kSkip;
  bool collective = e.kind == hal::EventKind::kCollective || e.kind == hal::EventKind::kP2P;
  if (!collective && e.dur_ns < threshold_ns_) return Verdict::kSkip;
  uint64_t second = e.ts_ns / 1'000'000'000;
  if (second != second_) {
    second_ = second;
    in_second_ = 0;
  }
  if (in_second_ >= per_second_) return Verdict::kOverRate;
  ++in_second_;
  return Verdict::kSpan;
}

SpanInput span_input(const hal::Event& e, int64_t mono_to_wall_ns, const std::string* stack,
                     const hal::ErrorCodeFn* codes) {
  SpanInput s;
  s.start_ns = int64_t(e.ts_ns) + mono_to_wall_ns;
  s.dur_ns = e.dur_ns;
  s.pid = e.pid;
  s.tid = e.tid;
  s.comm = std::string(e.comm_view());
  s.vendor = std::string(e.vendor);
  s.api = std::string(e.api);
  s.kind = std::string(hal::kind_name(e.kind));
  s.op = std::string(e.op);
  s.has_ret = e.has_ret;
  s.ret = e.ret;
  if (e.has_ret && e.ret != 0) {
    auto code = codes && *codes ? (*codes)(e.api, e.ret) : std::nullopt;
    if (code) s.error = std::string(code->name);
    auto cls =
        code ? code->cls
             : hal::ErrorClass(e.get_or(hal::Field::kErrClass, uint64_t(hal::ErrorClass::kOther)));
    s.failed = hal::is_failure(e.ret, uint64_t(cls));
  }
  s.bytes = e.get(hal::Field::kBytes);
  s.count = e.get(hal::Field::kCount);
  s.rank = e.get(hal::Field::kRank);
  s.nranks = e.get(hal::Field::kNranks);
  s.comm_hash = e.get(hal::Field::kCommHash);
  s.off_cpu_ns = e.off_cpu_ns;
  s.preempts = e.preempts;
  if (stack) s.stack = *stack;
  return s;
}

std::string frame_text(const hal::StackFrame& f) {
  if (f.python)
    return "[Python] " + f.file + ":" + std::to_string(f.line) + " in " + f.function + "()";
  std::string s = f.function.empty() ? "??" : f.function;
  if (!f.file.empty()) s += " at " + f.file + ":" + std::to_string(f.line);
  if (f.module_offset) {
    char off[32];
    std::snprintf(off, sizeof(off), "+0x%llx", (unsigned long long)*f.module_offset);
    s += " (" + f.module + off + ")";
  }
  return s;
}

void StackTexts::add(uint64_t stack_id, const std::vector<hal::StackFrame>& frames) {
  if (text_.count(stack_id)) return;
  std::string t;
  for (const auto& f : frames) t += (t.empty() ? "" : "\n") + frame_text(f);
  text_.emplace(stack_id, std::move(t));
  order_.push_back(stack_id);
  while (order_.size() > capacity_) {
    text_.erase(order_.front());
    order_.pop_front();
  }
}

const std::string* StackTexts::find(uint64_t stack_id) const {
  auto it = text_.find(stack_id);
  return it == text_.end() ? nullptr : &it->second;
}

void make_span(const SpanInput& in, const ContainerIds& ids, const std::string& node,
               std::mt19937_64& rng, pt::Span* s) {
  char trace_id[16], span_id[8];
  for (int i = 0; i < 2; ++i) {
    uint64_t v = rng();
    std::memcpy(trace_id + 8 * i, &v, 8);
  }
  uint64_t v = rng() | 1;  // an all-zero span id is invalid
  std::memcpy(span_id, &v, 8);
  s->set_trace_id(trace_id, sizeof(trace_id));
  s->set_span_id(span_id, sizeof(span_id));
  s->set_name(in.op);
  s->set_kind(pt::Span::SPAN_KIND_INTERNAL);
  s->set_start_time_unix_nano(uint64_t(in.start_ns));
  s->set_end_time_unix_nano(uint64_t(in.start_ns) + in.dur_ns);
  auto* a = s->mutable_attributes();
  if (in.failed) {
    std::string code = std::to_string(in.ret);
    s->mutable_status()->set_code(pt::Status::STATUS_CODE_ERROR);
    s->mutable_status()->set_message("returned " +
                                     (in.error.empty() ? code : in.error + " (" + code + ")"));
    add_attr(a, "error.type", in.error.empty() ? code : in.error);
  }
  add_attr(a, "process.pid", int64_t(in.pid));
  add_attr(a, "thread.id", int64_t(in.tid));
  add_attr(a, "process.executable.name", in.comm);
  add_attr(a, "ingero.vendor", in.vendor);
  add_attr(a, "ingero.api", in.api);
  add_attr(a, "ingero.kind", in.kind);
  if (!node.empty()) add_attr(a, "ingero.node", node);
  if (in.has_ret) add_attr(a, "ingero.return_code", in.ret);
  if (in.bytes) add_attr(a, "ingero.bytes", int64_t(*in.bytes));
  if (in.off_cpu_ns) add_attr(a, "ingero.off_cpu_ns", int64_t(in.off_cpu_ns));
  if (in.preempts) add_attr(a, "ingero.preemptions", int64_t(in.preempts));
  if (in.count) add_attr(a, "ingero.collective.count", int64_t(*in.count));
  if (in.rank) add_attr(a, "ingero.collective.rank", int64_t(*in.rank));
  if (in.nranks) add_attr(a, "ingero.collective.nranks", int64_t(*in.nranks));
  if (in.comm_hash) {
    char hex[24];
    std::snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)*in.comm_hash);
    add_attr(a, "ingero.collective.comm_hash", hex);
  }
  if (!in.stack.empty()) add_attr(a, "code.stacktrace", in.stack);
  if (!ids.container_id.empty()) add_attr(a, "container.id", ids.container_id);
  if (!ids.pod_uid.empty()) add_attr(a, "k8s.pod.uid", ids.pod_uid);
}

}  // namespace ingero::serve::otlp

#include "app/check_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "probe/bpf_session.h"
#include "probe/probe_cost.h"
#include "probe/record_decoder.h"
#include "probe/ring_reader.h"

namespace ingero::app {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kChunk = 1000;  // calls per timed chunk

// ns per call of one chunk of calls to f.
double time_chunk(const hal::PrivateFunction& f, uint64_t arg) {
  volatile uint64_t sink = 0;
  auto t0 = Clock::now();
  for (uint64_t i = 0; i < kChunk; ++i) sink = f.call(arg);
  auto t1 = Clock::now();
  (void)sink;
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / kChunk;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ingero's programs attached to one private function, as `trace` loads them.
struct IngeroProbe {
  std::unique_ptr<hal::BpfSession> session;
  std::vector<hal::Link> links;
  std::unique_ptr<hal::RingReader> reader;
  uint64_t records = 0;  // call records read back
};

Result<std::unique_ptr<IngeroProbe>> attach_ingero(const hal::PrivateFunction& f, bool stacks) {
  auto p = std::make_unique<IngeroProbe>();
  hal::BpfConfig cfg;  // the trace defaults: rings sized by CPU count, host programs loaded
  cfg.stacks = stacks;
  auto session = hal::BpfSession::open(cfg);
  if (!session) return session.error();
  p->session = std::move(*session);
  // A cudaMalloc-like probe: register arguments, and 8 bytes read at return through the
  // first argument.
  constexpr hal::ProbeSpec kSpec{.symbol = "ingero_bench",
                                 .kind = hal::EventKind::kAlloc,
                                 .args = {.return_read = hal::read_at_reg(0, 8)}};
  hal::CallSite site{
      .file_offset = f.file_offset(), .probe_id = 0, .recipe = hal::make_recipe(kSpec)};
  auto att = p->session->attach_calls(f.path(), {site});
  if (!att.failed.empty()) return Error{"attaching ingero's probes: " + att.failed[0].second, 0};
  p->links = std::move(att.links);
  uint64_t* records = &p->records;
  auto reader = hal::RingReader::create(p->session->calls_fd(), p->session->aux_fd(), -1,
                                        [records](const void* d, size_t) {
                                          uint32_t type = *static_cast<const uint32_t*>(d);
                                          if (type == INGERO_REC_CALL || type == INGERO_REC_LAUNCH)
                                            ++*records;
                                        });
  if (!reader) return reader.error();
  p->reader = std::move(*reader);
  p->reader->set_busy_flag(p->session->reader_busy_flag());
  return p;
}

}  // namespace

bool ProbeCostReport::exact() const {
  return min_entries == min_calls && min_returns == min_calls && ingero_records == ingero_calls &&
         stacks_records == stacks_calls;
}

Result<ProbeCostReport> measure_probe_cost(double seconds) {
  auto start = Clock::now();
  // One private copy per variant, all probed at once and timed in turns, so load on the
  // machine falls on every variant alike.
  std::vector<std::unique_ptr<hal::PrivateFunction>> fns;
  for (int i = 0; i < 4; ++i) {
    auto f = hal::PrivateFunction::create();
    if (!f) return f.error();
    fns.push_back(std::move(*f));
  }
  auto pair = hal::MinimalProbePair::attach(fns[1]->path(), fns[1]->file_offset());
  if (!pair) return pair.error();
  auto plain = attach_ingero(*fns[2], false);
  if (!plain) return plain.error();
  auto stacks = attach_ingero(*fns[3], true);
  if (!stacks) return stacks.error();

  uint64_t slot = 0;
  const uint64_t arg = reinterpret_cast<uint64_t>(&slot);  // read at return by the recipe
  std::vector<double> ns[4];
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (ns[0].size() < 5 || Clock::now() < end) {
    for (int i = 0; i < 4; ++i) ns[i].push_back(time_chunk(*fns[i], arg));
    // Drained untimed: the figures are what the traced thread pays.
    for (auto* p : {plain->get(), stacks->get()})
      if (auto r = p->reader->drain(); !r) return r.error();
  }
  ProbeCostReport r;
  const uint64_t calls = kChunk * ns[0].size();
  r.untraced_ns = median(ns[0]);
  r.min_pair_ns = median(ns[1]);
  r.ingero_ns = median(ns[2]);
  r.ingero_stacks_ns = median(ns[3]);
  r.untraced_calls = r.min_calls = r.ingero_calls = r.stacks_calls = calls;
  r.min_entries = (*pair)->entries();
  r.min_returns = (*pair)->returns();
  r.ingero_records = (*plain)->records;
  r.stacks_records = (*stacks)->records;
  r.uprobe_multi = (*plain)->session->uses_uprobe_multi();
  r.min_pair_multi = (*pair)->uses_uprobe_multi();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

void print_probe_cost(std::ostream& out, const ProbeCostReport& r) {
  char line[160];
  out << "Probe cost on this host: median ns per call of a private function, " << r.untraced_calls
      << " calls each, " << (r.uprobe_multi ? "uprobe_multi" : "perf-event uprobe") << " links\n";
  auto row = [&](const char* name, double ns, double added, uint64_t calls, uint64_t hits,
                 const char* what) {
    std::snprintf(line, sizeof(line), "  %-22s %8.1f ns  %+8.1f ns   %8llu calls", name, ns, added,
                  static_cast<unsigned long long>(calls));
    out << line;
    if (what) out << ", " << hits << " " << what;
    out << "\n";
  };
  row("untraced", r.untraced_ns, 0, r.untraced_calls, 0, nullptr);
  row("minimal uprobe pair", r.min_pair_ns, r.min_added(), r.min_calls,
      std::min(r.min_entries, r.min_returns), "entry+return hits");
  row("ingero --no-stack", r.ingero_ns, r.ingero_added(), r.ingero_calls, r.ingero_records,
      "records");
  row("ingero (stacks)", r.ingero_stacks_ns, r.stacks_added(), r.stacks_calls, r.stacks_records,
      "records");
  if (r.min_added() > 0) {
    std::snprintf(line, sizeof(line),
                  "  ingero / minimal pair (added cost): %.2fx, with stacks %.2fx\n",
                  r.ingero_added() / r.min_added(), r.stacks_added() / r.min_added());
    out << line;
  }
  out << "Predicted cost to the traced process (CPU time of one core):\n";
  for (double rate : {10e3, 50e3, 200e3}) {
    std::snprintf(line, sizeof(line), "  %4.0fk calls/s: %6.2f%% (--no-stack), %6.2f%% (stacks)\n",
                  rate / 1e3, rate * r.ingero_added() * 1e-9 * 100,
                  rate * r.stacks_added() * 1e-9 * 100);
    out << line;
  }
  if (r.uprobe_multi != r.min_pair_multi)
    out << "  (the minimal pair attached with "
        << (r.min_pair_multi ? "uprobe_multi" : "perf-event uprobes")
        << ": the two are not on the same kernel path)\n";
  if (!r.exact()) out << "FAIL: probe hits differ from the calls made (see the counts above)\n";
}

nlohmann::json probe_cost_json(const ProbeCostReport& r) {
  nlohmann::json pred = nlohmann::json::array();
  for (double rate : {10e3, 50e3, 200e3})
    pred.push_back({{"calls_per_s", rate},
                    {"cpu_share_no_stack", rate * r.ingero_added() * 1e-9},
                    {"cpu_share_stacks", rate * r.stacks_added() * 1e-9}});
  return {{"untraced_ns", r.untraced_ns},
          {"min_pair_ns", r.min_pair_ns},
          {"ingero_ns", r.ingero_ns},
          {"ingero_stacks_ns", r.ingero_stacks_ns},
          {"untraced_calls", r.untraced_calls},
          {"min_calls", r.min_calls},
          {"min_entries", r.min_entries},
          {"min_returns", r.min_returns},
          {"ingero_calls", r.ingero_calls},
          {"ingero_records", r.ingero_records},
          {"stacks_calls", r.stacks_calls},
          {"stacks_records", r.stacks_records},
          {"uprobe_multi", r.uprobe_multi},
          {"min_pair_uprobe_multi", r.min_pair_multi},
          {"exact", r.exact()},
          {"seconds", r.seconds},
          {"predicted", pred}};
}

}  // namespace ingero::app

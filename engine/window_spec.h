// What a user asked for (--since/--from/--to, a tool's arguments) resolved against a trace:
// relative times count back from the trace's end (where its last event ended), since a stored
// trace is read long after it was written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/trace_source.h"
#include "hal/result.h"

namespace ingero::engine {

struct WindowSpec {
  std::string since, from, to;
  std::optional<uint32_t> pid;
};
// The spec's own errors, before any trace is read (a usage error: exit 2): a malformed
// --since, --from or --to, --since with either of the others, --from after --to.
ingero::Status check_window_spec(const WindowSpec& spec);
// The window: check_window_spec()'s errors, else --since counted back from the trace's end.
ingero::Result<Window> resolve_window(TraceSource& source, const WindowSpec& spec);
// Where `w` misses the trace (a --from in the wrong year or zone reads as a quiet trace
// otherwise): "the window holds no event of PATH, which runs from A to B"; "" where it holds
// some of it, or the trace holds nothing.
std::string window_miss(TraceSource& source, const Window& w, const std::string& path);
// The same for one node of a merged trace (`explain --node N`): a window that holds events of
// other nodes but none of N was answered with an empty report and no word.
std::string node_window_miss(TraceSource& source, const Window& w, const std::string& node);

// "30s", "5m", "1h", "7d", "250ms", "2.5s", "500us", "100ns". Negative on error, and for a number
// without its unit: `--since 5` was taken as 5 s without a word, where a user may have meant
// minutes.
double parse_duration_s(const std::string& text);
// "2026-04-03T12:18:02" or "2026-04-03 12:18:02" (UTC), with an optional fraction of a second
// and zone ("Z", "+02:00", "-0500", "+02"), or Unix seconds / ns as digits. Anything else after
// the seconds: nullopt.
std::optional<int64_t> parse_time_ns(const std::string& text);

}  // namespace ingero::engine

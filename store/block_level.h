// How hard the trace writer compresses the blocks it writes while tracing (calls, their folded
// form, host events: store/call_block.h, store/host_block.h). zstd's level 1, not the default
// 3: at the step proxy's rates zstd was a sixth of the tracer's CPU, and level 1 takes about
// half as long for blocks ~5% larger (docs/performance.md, "The tracer's own CPU"). Offline
// rewrites (`ingero compact`) keep ColumnBlock's default.
#pragma once

namespace ingero::store {

inline constexpr int kLiveBlockLevel = 1;

}  // namespace ingero::store

// The dashboard's model cache is the store's TraceCache (store/trace_cache.h): one computation
// per change of the trace file, shared by concurrent requests. The MCP tools use it too.
#pragma once

#include "store/trace_cache.h"

namespace ingero::serve::report {

using ReportCache = store::TraceCache;
using store::file_stamp;
using store::FileStamp;

}  // namespace ingero::serve::report

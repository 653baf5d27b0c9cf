// The report model of a trace file, for `ingero report` and `ingero dashboard`: opens the file
// read-only, resolves the window against it, and builds serve/report's model over the
// file's TraceSource (app/sql_trace_source.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/window_spec.h"
#include "hal/result.h"
#include "store/sql_trace_source.h"

namespace ingero::app {

// A read error of the engine's source is an Error too, naming the file. `miss`, where given:
// engine::window_miss's sentence, "" where the window holds some of the trace.
Result<nlohmann::json> build_report_model(const std::string& path, const engine::WindowSpec& spec,
                                          const std::string& title, std::string* miss = nullptr);

}  // namespace ingero::app

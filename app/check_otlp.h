// `ingero check --otlp ENDPOINT [--db FILE]`: whether the OTLP receiver the tracer would export
// to answers, and what the last OTLP-exporting session of a trace file sent and dropped.
#pragma once

#include <string>

#include "app/check_items.h"

namespace ingero::app {

// One line, otlp_endpoint: an empty metrics export POSTed with the headers, TLS and timeout the
// tracer would use (serve/otlp/config.h). pass: 2xx. optional (tracing works; the exporter
// would retry, then drop and count): no answer, or any other status, with the fix.
void check_otlp_endpoint(const std::string& endpoint, CheckReport& rep);
// One line, otlp_delivery, when `db` holds a session that exported OTLP (bpf_stats otlp_*):
// the latest such session's sent and dropped items by signal and the drops' reasons. pass:
// nothing dropped; optional otherwise. `explicit_db`: a missing or unreadable file is said.
void check_otlp_delivery(const std::string& db, bool explicit_db, CheckReport& rep);

}  // namespace ingero::app

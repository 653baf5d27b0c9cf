#include "engine/failed_calls_counts.h"

namespace ingero::engine {

FailedCalls::FailedCalls(TraceSource& source) : counts_(std::make_unique<Counts>(source)) {}
FailedCalls::~FailedCalls() = default;
void FailedCalls::call(const hal::Event& e) { counts_->call(e); }
void FailedCalls::run(const CallRun& r) { counts_->run(r); }

}  // namespace ingero::engine

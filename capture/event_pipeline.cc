#include "capture/event_pipeline.h"

#include <cstring>

#include "capture/host_info.h"
#include "capture/stack_collector.h"
#include "hal/record_layout.h"
#include "kernelside/host_decoder.h"

namespace ingero::capture {

void EventPipeline::note_pid(uint32_t pid, const char* comm) {
  if (!seen_pids_.insert(pid).second) return;
  if (stacks) stacks->process_seen(pid);
  std::string name, cmdline;
  if (read_proc) {
    std::string base = "/proc/" + std::to_string(pid);
    name = read_small_file(base + "/comm");
    cmdline = read_small_file(base + "/cmdline");
    for (auto& c : cmdline)
      if (c == '\0') c = ' ';
  }
  if (name.empty()) name = std::string(comm, strnlen(comm, INGERO_COMM_LEN));  // already exited
  (void)out_.on_process(pid, name, cmdline, wall_now_ns());
}

void EventPipeline::on_record(const void* data, size_t size) {
  if (size < sizeof(uint32_t)) {
    ++counters_.malformed;
    return;
  }
  uint32_t type;
  std::memcpy(&type, data, sizeof(type));
  switch (type) {
    case INGERO_REC_CALL: {
      if (size < INGERO_CALL_REC_SHORT) {
        ++counters_.malformed;
        return;
      }
      const ingero_call_rec* rec = static_cast<const ingero_call_rec*>(data);
      ingero_call_rec full;
      if (size < sizeof(ingero_call_rec)) {
        // A short record: no entry capture. Copy into a full-size struct so no reader can
        // run past the end of the ring-buffer sample.
        std::memcpy(&full, data, INGERO_CALL_REC_SHORT);
        full.entry_len = 0;
        rec = &full;
      } else if (rec->entry_len > INGERO_ENTRY_READ_MAX) {
        ++counters_.malformed;
        return;
      }
      if (!decoder_.decode(*rec, ev_)) {
        ++counters_.unknown_probe;
        return;
      }
      ++counters_.calls;
      if ((counters_.calls & 63) == 0 && read_proc) {
        int64_t lag = mono_now_ns() - int64_t(rec->end_ns);
        ++lag_log2_[lag > 0 ? 63 - __builtin_clzll(uint64_t(lag)) : 0];
        ++lag_samples_;
      }
      ev_.stack_id = stacks ? stacks->stack_id(rec->pid, rec->stack_hash) : 0;
      comms_.observe(ev_);
      note_pid(rec->pid, rec->comm);
      gpu_pids_.insert(rec->pid);
      (void)out_.on_event(ev_);
      break;
    }
    case INGERO_REC_LIBWATCH: {
      if (size < sizeof(ingero_libwatch_rec)) {
        ++counters_.malformed;
        return;
      }
      ++counters_.libwatch;
      if (on_libwatch) on_libwatch(int(static_cast<const ingero_libwatch_rec*>(data)->pid));
      break;
    }
    case INGERO_REC_SCHED:
    case INGERO_REC_PROC:
    case INGERO_REC_BLOCK:
    case INGERO_REC_TCP: {
      if (!kernelside::decode_host_record(data, size, ev_)) {
        ++counters_.malformed;
        return;
      }
      ++counters_.host;
      if (ev_.pid) note_pid(ev_.pid, ev_.comm.data());
      // Name the preemptors and children too: "who took the CPU" needs a name.
      if (auto peer = ev_.get(hal::Field::kPeerPid); peer && *peer)
        note_pid(uint32_t(*peer), ev_.peer_comm.data());
      (void)out_.on_event(ev_);
      if (stacks && ev_.kind == hal::EventKind::kProcessExit) stacks->process_exited(ev_.pid);
      break;
    }
    case INGERO_REC_PYCODE: {
      if (size < sizeof(ingero_py_code_rec)) {
        ++counters_.malformed;
        return;
      }
      if (stacks) stacks->on_py_code(*static_cast<const ingero_py_code_rec*>(data));
      break;
    }
    case INGERO_REC_STACK: {
      if (size < sizeof(ingero_stack_rec)) {
        ++counters_.malformed;
        return;
      }
      ++counters_.stacks;
      if (stacks) stacks->on_stack(*static_cast<const ingero_stack_rec*>(data));
      break;
    }
    default:
      ++counters_.malformed;
  }
}

void EventPipeline::add(const hal::Event& ev) { (void)out_.on_event(ev); }

uint64_t EventPipeline::delivery_lag_quantile_ns(double q) const {
  if (!lag_samples_) return 0;
  uint64_t rank = uint64_t(q * double(lag_samples_) + 0.999999), seen = 0;
  for (size_t b = 0; b < lag_log2_.size(); ++b) {
    seen += lag_log2_[b];
    if (seen >= rank) return uint64_t(1) << (b + 1);  // the bucket's upper bound
  }
  return 0;
}

void EventPipeline::commit() { (void)out_.commit(); }

}  // namespace ingero::capture

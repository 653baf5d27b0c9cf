#include "capture/event_pipeline.h"

#include <cstring>

#include "capture/host_info.h"
#include "capture/inflight_monitor.h"
#include "capture/kernel_namer.h"
#include "capture/launch_nesting.h"
#include "capture/stack_collector.h"
#include "kernelside/host_decoder.h"
#include "probe/record_layout.h"

namespace ingero::capture {

void EventPipeline::note_pid(uint32_t pid, const char* comm, bool own) {
  if (own && pid == last_seen_pid_) return;
  // Bounded: on a busy host every short-lived process that preempts a traced thread is named
  // here, and an agent left on for days would otherwise keep one entry for each pid ever seen
  // (and never rename a pid the kernel reused). Past the bound they are named again.
  if (seen_pids_.size() >= kMaxSeenPids && !seen_pids_.count(pid)) seen_pids_.clear();
  auto [it, fresh] = seen_pids_.try_emplace(pid, false);
  if (own) {
    last_seen_pid_ = pid;
    if (!it->second) {
      it->second = true;
      if (stacks) stacks->process_seen(pid);
    }
  }
  if (!fresh) return;
  name_process(pid, comm);
}

void EventPipeline::name_process(uint32_t pid, const char* comm) {
  std::string name, cmdline;
  if (read_proc) {
    std::string base = "/proc/" + std::to_string(pid);
    name = read_small_file(base + "/comm");
    cmdline = read_small_file(base + "/cmdline");
    for (auto& c : cmdline)
      if (c == '\0') c = ' ';
  }
  if (name.empty()) name = std::string(comm, strnlen(comm, INGERO_COMM_LEN));  // already exited
  (void)out_.on_process(pid, name, cmdline, clock.now());
}

uint64_t EventPipeline::resolve_stack(uint32_t pid, uint64_t hash) {
  if (!stacks || !hash) return 0;
  if (!stacks->knows(pid, hash) && catch_up_stacks) catch_up_stacks();
  return stacks->stack_id(pid, hash);
}

// A call carries its thread's name and cgroup only when they changed since the thread last
// shipped them; the others take them from here.
void EventPipeline::identify(hal::Event& ev, bool shipped) {
  if (shipped) {
    auto [it, fresh] = idents_.try_emplace(ev.tid);
    it->second.comm = ev.comm;
    it->second.cgroup_id = ev.cgroup_id;
    if (fresh) tids_of_[ev.pid].push_back(ev.tid);
    last_ident_tid_ = ev.tid;
    last_ident_ = &it->second;  // a map's nodes stay where they are
    return;
  }
  if (!last_ident_ || last_ident_tid_ != ev.tid) {
    auto it = idents_.find(ev.tid);
    last_ident_ = it != idents_.end() ? &it->second : nullptr;
    last_ident_tid_ = ev.tid;
  }
  if (last_ident_) {
    ev.comm = last_ident_->comm;
    ev.cgroup_id = last_ident_->cgroup_id;
    return;
  }
  // The record that carried it was lost: ask the kernel while the thread lives.
  ++counters_.no_ident;
  if (read_proc)
    ev.set_comm(read_small_file("/proc/" + std::to_string(ev.pid) + "/task/" +
                                std::to_string(ev.tid) + "/comm"));
  identify(ev, true);
}

void EventPipeline::forget_process(uint32_t pid) {
  seen_pids_.erase(pid);  // a process that reuses the pid is named anew
  if (last_seen_pid_ == pid) last_seen_pid_ = UINT32_MAX;
  auto it = tids_of_.find(pid);
  if (it == tids_of_.end()) return;
  for (uint32_t tid : it->second) idents_.erase(tid);
  last_ident_ = nullptr;
  tids_of_.erase(it);
}

// A process's exit record (host ring) may be read before its last calls (calls ring) when they
// arrive while the rings are being read: what is kept for it goes one read cycle later.
void EventPipeline::emit_ready() {
  for (const hal::Event& e : ready_) {
    name_kernel(e);
    (void)out_.on_event(e);
  }
  ready_.clear();
}

// A launch about to go to the sinks (only those that do: not a driver launch folded into its
// runtime launch): its kernel's name goes first.
void EventPipeline::name_kernel(const hal::Event& e) {
  if (kernels && e.kind == hal::EventKind::kLaunch)
    if (auto f = e.get(hal::Field::kFunc)) kernels->on_launch(e.pid, *f, e.ts_ns);
}

void EventPipeline::end_cycle(bool final) {
  if (nesting) {
    nesting->flush(ready_, final);
    emit_ready();
  }
  for (uint32_t pid : exited_prev_) {
    if (stacks) stacks->process_exited(pid);
    if (kernels) kernels->process_exited(pid);
    forget_process(pid);
  }
  exited_prev_.swap(exited_now_);
  exited_now_.clear();
}

void EventPipeline::on_call(const void* data, size_t size) {
  ++counters_.call_records;
  if (!hal::unpack_call(data, size, rec_)) {
    ++counters_.malformed;
    return;
  }
  const ingero_call_rec& h = rec_.hdr;
  // Before decoding: catching up may deliver other records through this pipeline.
  uint64_t stack = resolve_stack(h.pid, h.stack_hash);
  if (!decoder_.decode(rec_, ev_)) {
    ++counters_.unknown_probe;
    return;
  }
  if (ev_.kind == hal::EventKind::kKernelName) {
    // A name source: its name is kept, and it is not a call anyone counts.
    ++counters_.name_records;
    auto by_op = counters_.name_records_by_op.find(ev_.op);
    if (by_op == counters_.name_records_by_op.end())
      by_op = counters_.name_records_by_op.emplace(std::string(ev_.op), 0).first;
    ++by_op->second;
    identify(ev_, rec_.has_ident());
    note_pid(h.pid, ev_.comm.data());
    if (kernels)
      if (auto c = decoder_.name_capture(rec_); c && kernels->on_capture(*c))
        ++counters_.name_news_by_probe[h.probe_id];
    return;
  }
  ++counters_.calls;
  counters_.nested += h.nested;
  if (!ev_.timed) ++counters_.untimed;
  if ((counters_.calls & 63) == 0 && read_proc) {
    int64_t lag = mono_now_ns() - int64_t(h.end_ns ? h.end_ns : h.start_ns);
    ++lag_log2_[lag > 0 ? 63 - __builtin_clzll(uint64_t(lag)) : 0];
    ++lag_samples_;
  }
  identify(ev_, rec_.has_ident());
  ev_.stack_id = stack;
  communicators_.observe(ev_);
  if (inflight) inflight->note_call(ev_);
  note_pid(h.pid, ev_.comm.data());
  if (h.pid != last_gpu_pid_) {
    gpu_pids_.insert(h.pid);
    last_gpu_pid_ = h.pid;
  }
  if (ev_.kind == hal::EventKind::kLaunch && on_first_launch &&
      (h.probe_id >= launch_probes_seen_.size() || !launch_probes_seen_[h.probe_id])) {
    if (h.probe_id >= launch_probes_seen_.size()) launch_probes_seen_.resize(h.probe_id + 1);
    launch_probes_seen_[h.probe_id] = true;
    on_first_launch(h.probe_id);
  }
  if (nesting) {
    using Fate = LaunchNesting::Fate;
    Fate f = Fate::kEmit;
    if (ev_.kind == hal::EventKind::kLaunch) {
      f = nesting->on_launch(h.probe_id, ev_, ready_);
      // A driver launch named as the runtime launch it was made in counts the driver's call in
      // it, as a fold does.
      if (f == Fate::kEmit && ev_.nested > h.nested) counters_.nested += ev_.nested - h.nested;
    } else {
      nesting->before_call(ev_.tid, ready_);
    }
    emit_ready();
    if (f == Fate::kFolded) {  // a call made inside another: counted there, as BPF counts them
      --counters_.calls;
      ++counters_.nested;
      if (!ev_.timed) --counters_.untimed;
    }
    if (f != Fate::kEmit) return;
  }
  name_kernel(ev_);
  (void)out_.on_event(ev_);
}

void EventPipeline::on_record(const void* data, size_t size) {
  if (size < sizeof(uint32_t)) {
    ++counters_.malformed;
    return;
  }
  uint32_t type;
  std::memcpy(&type, data, sizeof(type));
  if (batch_records) {  // a batch of launches counts as its launches
    uint32_t n = 1;
    if (type == INGERO_REC_LAUNCH_BATCH && size >= sizeof(ingero_launch_batch_rec))
      std::memcpy(&n, static_cast<const uint8_t*>(data) + offsetof(ingero_launch_batch_rec, count),
                  sizeof(n));
    since_commit_ += n;
    if (since_commit_ >= batch_records && on_batch) on_batch();
  }
  switch (type) {
    case INGERO_REC_CALL:
    case INGERO_REC_LAUNCH:
      on_call(data, size);
      break;
    case INGERO_REC_LAUNCH_BATCH:  // bpf/launch_batch.h: a CPU's launches, in order
      if (!hal::for_each_batched_launch(data, size,
                                        [this](const void* d, size_t n) { on_call(d, n); }))
        ++counters_.malformed;
      break;
    case INGERO_REC_LIBWATCH: {
      if (size < sizeof(ingero_libwatch_rec)) {
        ++counters_.malformed;
        return;
      }
      ++counters_.libwatch;
      const auto* w = static_cast<const ingero_libwatch_rec*>(data);
      if (kernels) kernels->process_mapped(w->pid);
      if (nesting) nesting->process_mapped(w->pid);
      if (on_libwatch) on_libwatch(int(w->pid), w->ts_ns);
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
        note_pid(uint32_t(*peer), ev_.peer_comm.data(), false);
      // An exec replaces the process's mappings: snapshot them now, while it runs, so a short
      // program's stacks still resolve after it exits.
      if (ev_.kind == hal::EventKind::kProcessExec && stacks) stacks->process_changed(ev_.pid);
      if (ev_.kind == hal::EventKind::kProcessExec && kernels)
        kernels->process_exec(ev_.pid, ev_.ts_ns);
      if (ev_.kind == hal::EventKind::kProcessFork && kernels)
        if (auto child = ev_.get(hal::Field::kPeerPid))
          kernels->process_fork(ev_.pid, uint32_t(*child), ev_.ts_ns);
      // Named again: a GPU process's child was named at its fork, after its parent, and kept
      // that name through its exec (explain blamed "bash" for the program it ran).
      if (ev_.kind == hal::EventKind::kProcessExec) name_process(ev_.pid, ev_.comm.data());
      (void)out_.on_event(ev_);
      if (ev_.kind == hal::EventKind::kProcessExit) exited_now_.push_back(ev_.pid);
      break;
    }
    case INGERO_REC_CPU_SAMPLE: {
      if (!kernelside::decode_cpu_sample(data, size, ev_)) {
        ++counters_.malformed;
        return;
      }
      ++counters_.cpu_samples;
      uint64_t hash = static_cast<const ingero_cpu_sample_rec*>(data)->stack_hash;
      ev_.stack_id = stacks && hash ? stacks->stack_id(ev_.pid, hash) : 0;
      if (auto it = idents_.find(ev_.tid); it != idents_.end()) ev_.comm = it->second.comm;
      note_pid(ev_.pid, ev_.comm.data());
      (void)out_.on_event(ev_);
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

void EventPipeline::commit() {
  since_commit_ = 0;
  (void)out_.commit();
}

}  // namespace ingero::capture

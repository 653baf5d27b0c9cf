// Turns ring-buffer call records into Events: probe id -> (backend, spec, library), then the
// spec's FieldRefs, then the backend's decode(). Pure apart from the table it is given.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "hal/backend.h"
#include "hal/call_record.h"
#include "hal/event.h"
#include "hal/kernel_names.h"
#include "ingero_records.h"

namespace ingero::hal {

struct AttachedProbe {
  const VendorBackend* backend = nullptr;
  const ProbeSpec* spec = nullptr;
  LibraryMatch match;
  std::string library;  // display path of the file
  std::string symbol;   // exported name attached
};

// Probe ids are indexes into this table; the BPF attach cookie carries them.
class ProbeTable {
 public:
  ProbeTable() = default;
  ProbeTable(const ProbeTable&) = delete;  // index_ points into probes_ (a move keeps both)
  ProbeTable& operator=(const ProbeTable&) = delete;
  ProbeTable(ProbeTable&&) = default;
  ProbeTable& operator=(ProbeTable&&) = default;
  uint32_t add(AttachedProbe p);
  // Every record looks its probe up (a deque's index was 3% of the tracer's CPU on a launch
  // loop): through a vector of the entries' addresses.
  const AttachedProbe* find(uint32_t id) const { return id < index_.size() ? index_[id] : nullptr; }
  size_t size() const { return probes_.size(); }
  const std::deque<AttachedProbe>& all() const { return probes_; }

 private:
  std::deque<AttachedProbe> probes_;         // stable addresses: Events point into it
  std::vector<const AttachedProbe*> index_;  // by id
};

// The recipe the BPF side needs for a spec, in a library at `layer` among its vendor's
// (LibraryMatch::layer).
ingero_recipe make_recipe(const ProbeSpec& spec, int layer = 0);

class CallDecoder {
 public:
  explicit CallDecoder(const ProbeTable& table) : table_(table) {}
  // False (and `ev` untouched) when the probe id is unknown: the caller counts it.
  bool decode(const CallRecord& rec, Event& ev) const;
  // A kernel name source's capture (a spec of kind kKernelName): nullopt for other probes, and
  // for calls that name nothing (failed, unfinished, a faulted read, a null key or name).
  std::optional<NameCapture> name_capture(const CallRecord& rec) const;

 private:
  const ProbeTable& table_;
};

}  // namespace ingero::hal

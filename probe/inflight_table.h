// The calls in flight, read from the thread table with map look-ups, where the kernel refuses
// the map-element iterator that reads them otherwise (bpf/calls.bpf.c: ingero_inflight). Some
// kernels do: Linux 6.18.44 with a BPF LSM policy answered EPERM to loading any
// `iter/bpf_map_elem` program, before its verifier ran, and the whole object failed to load
// with it (BpfSession::load then loads it without). The records are the iterator's, field for
// field; what costs more is the reading: two system calls and a copy of the thread's whole
// state a thread, where the iterator copies only the calls in flight.
#pragma once

#include <vector>

#include "hal/result.h"
#include "ingero_records.h"

namespace ingero::hal {

// The map descriptors the iterator reads: `threads` (calls.bpf.c), `recipes` (by probe id) and
// `offcpu` (host.bpf.c; -1: no host context). Appends one record per thread inside a traced
// call, as ingero_inflight writes it.
Status read_inflight_from_table(int threads_fd, int recipes_fd, int offcpu_fd,
                                std::vector<ingero_inflight_rec>& out);

}  // namespace ingero::hal

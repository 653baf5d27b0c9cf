// Who descends from whom, read from /proc: the processes a pid filter must let in at start
// besides the ones given (a launcher's workers forked before the tracer attached).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "probe/proc_maps.h"

namespace ingero::hal {

// The parent pid in the text of /proc/PID/stat (the field after the state, past the last ')'
// of the name, which may hold spaces and parentheses); nullopt when it is not there.
std::optional<int> parent_in_stat(std::string_view stat);

// Every live descendant of `roots` (children, their children, ...), sorted, roots excluded:
// one read of each process's stat. A process that exits meanwhile is skipped.
std::vector<int> descendants_of(const HostView& host, const std::vector<int>& roots);

}  // namespace ingero::hal

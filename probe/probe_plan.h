// Probe planning: which functions of one parsed file to attach, for which backend. Pure.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "hal/backend.h"

namespace ingero::hal {

struct ResolvedProbe {
  const VendorBackend* backend = nullptr;
  const ProbeSpec* spec = nullptr;
  LibraryMatch match;
  std::string symbol;  // the exported name attached: "cuMemAlloc_v2", "pncclAllReduce"
  uint64_t vaddr = 0;
  uint64_t file_offset = 0;
};

struct LibraryPlan {
  const VendorBackend* backend = nullptr;
  LibraryMatch match;
  std::string path;
  std::string display_path;
  std::string soname;
  std::string build_id;
  std::vector<ResolvedProbe> probes;  // one per distinct address
  size_t specs_total = 0;
  size_t specs_resolved = 0;
  std::vector<std::string_view> missing_required;  // named in the table, absent here
  std::vector<std::string_view> missing_optional;
};

// Suffix for one Variant bit: kPtsz -> "_ptsz".
std::string_view variant_suffix(Variant v);

// Which specs to plan (null: all). A spec left out is not counted, found or missing.
using SpecFilter = std::function<bool(const ProbeSpec&)>;

// Resolves every spec of every match of every backend against `file`.
std::vector<LibraryPlan> plan_file(const MappedFile& file,
                                   std::span<const VendorBackend* const> backends,
                                   const SpecFilter& want = {});

// Resolves one spec: every allowed variant that exists, deduplicated by address, falling
// back to the `p`-prefixed profiling alias (pncclAllReduce) when no plain name exists.
std::vector<std::pair<std::string, const ElfSymbol*>> resolve_spec(const SymbolIndex& symbols,
                                                                   const ProbeSpec& spec);

}  // namespace ingero::hal

#include "probe/probe_plan.h"

#include <algorithm>
#include <unordered_set>

namespace ingero::hal {

std::string_view variant_suffix(Variant v) {
  switch (v) {
    case kBase:
      return "";
    case kPtsz:
      return "_ptsz";
    case kPtds:
      return "_ptds";
    case kV2:
      return "_v2";
    case kV2Ptsz:
      return "_v2_ptsz";
    case kV2Ptds:
      return "_v2_ptds";
    case kSpt:
      return "_spt";
  }
  return "";
}

std::vector<std::pair<std::string, const ElfSymbol*>> resolve_spec(const SymbolIndex& symbols,
                                                                   const ProbeSpec& spec) {
  static constexpr Variant kOrder[] = {kBase, kV2, kPtsz, kPtds, kV2Ptsz, kV2Ptds, kSpt};
  std::vector<std::pair<std::string, const ElfSymbol*>> out;
  std::unordered_set<uint64_t> seen;
  auto try_name = [&](const std::string& name) {
    const ElfSymbol* s = symbols.find_function(name);
    if (s && seen.insert(s->value).second) out.emplace_back(name, s);
  };
  for (Variant v : kOrder) {
    if (!(spec.variants & v)) continue;
    try_name(std::string(spec.symbol) + std::string(variant_suffix(v)));
  }
  if (out.empty()) {
    // Profiling-interface aliases: libnccl defines pncclX strongly and ncclX weakly; a
    // build may strip the weak one.
    for (Variant v : kOrder)
      if (spec.variants & v)
        try_name("p" + std::string(spec.symbol) + std::string(variant_suffix(v)));
  }
  return out;
}

std::vector<LibraryPlan> plan_file(const MappedFile& file,
                                   std::span<const VendorBackend* const> backends,
                                   const SpecFilter& want) {
  std::vector<LibraryPlan> plans;
  for (const VendorBackend* b : backends) {
    for (const LibraryMatch& m : b->match(file)) {
      LibraryPlan plan;
      plan.backend = b;
      plan.match = m;
      plan.path = file.path;
      plan.display_path = file.display_path;
      plan.soname = file.symbols->soname();
      plan.build_id = file.symbols->build_id();
      std::unordered_set<uint64_t> addrs;
      for (const ProbeSpec& spec : b->probes(m)) {
        if (want && !want(spec)) continue;
        ++plan.specs_total;
        auto found = resolve_spec(*file.symbols, spec);
        if (found.empty()) {
          (spec.optional ? plan.missing_optional : plan.missing_required).push_back(spec.symbol);
          continue;
        }
        ++plan.specs_resolved;
        for (auto& [name, sym] : found) {
          auto off = file.symbols->file_offset(sym->value);
          if (!off || !addrs.insert(sym->value).second) continue;
          plan.probes.push_back({b, &spec, m, name, sym->value, *off});
        }
      }
      plans.push_back(std::move(plan));
    }
  }
  return plans;
}

}  // namespace ingero::hal
